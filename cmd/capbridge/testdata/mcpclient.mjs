// An MCP host stand-in: the official TypeScript SDK's client drives
// `capbridge mcp` over stdio through search, describe and two runs (one
// TypeScript, one Python) that combine the filesystem and memory servers,
// and prints one JSON object of what it saw. argv: the SDK's directory,
// the capbridge binary, the notes file, then capbridge's arguments.
const [sdkDir, bin, notes, ...args] = process.argv.slice(2);
const { Client } = await import(sdkDir + "/dist/esm/client/index.js");
const { StdioClientTransport } = await import(sdkDir + "/dist/esm/client/stdio.js");

const client = new Client({ name: "capbridge-e2e", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command: bin, args, stderr: "inherit" }));
const out = { server: client.getServerVersion() };
const tools = await client.listTools();
out.tools = Object.fromEntries(tools.tools.map((t) => [t.name, t.description]));
const text = (r) => r.content.map((c) => c.text ?? "").join("");
out.search = text(await client.callTool({ name: "search", arguments: { query: "read text file" } }));
out.describe = text(await client.callTool({ name: "describe", arguments: { server: "memory", tools: ["search_nodes"], language: "python" } }));

const ts = `import * as filesystem from "./filesystem.js";
import * as memory from "./memory.js";
const f = await filesystem.readTextFile({ path: ${JSON.stringify(notes)} });
const lines = f.text().split("\\n").filter((l: string) => l !== "");
await memory.createEntities({ entities: [{ name: "notes", entityType: "file", observations: lines }] });
const found = await memory.searchNodes({ query: "notes" });
console.log("stored", lines.length);
export default (found.structured as { entities: { observations: string[] }[] }).entities[0].observations;`;
const py = `import filesystem, memory
graph = await memory.read_graph()
obs = graph.structured["entities"][0]["observations"]
await filesystem.write_file(path=${JSON.stringify(notes + ".upper")}, content="\\n".join(o.upper() for o in obs))
back = await filesystem.read_text_file(path=${JSON.stringify(notes + ".upper")})
print("wrote", len(obs))
back.text().split("\\n")`;
let progress = 0;
const run = async (language, code) => {
  const r = await client.callTool({ name: "run", arguments: { language, code, timeout: 60 } }, undefined, {
    onprogress: () => progress++, timeout: 120000,
  });
  return { isError: r.isError ?? false, text: text(r), structured: r.structuredContent };
};
out.ts = await run("typescript", ts);
out.py = await run("python", py);
out.denied = await run("python", `import socket\ns = socket.create_connection(("127.0.0.1", 9))`);
out.progress = progress;
await client.close();
console.log(JSON.stringify(out));

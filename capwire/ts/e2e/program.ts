// The end-to-end program the Go test internal/testkit/clienttest runs against a
// real bridge: it dials with nothing but CAPBRIDGE_SOCKET and
// CAPBRIDGE_TOKEN and prints one "what: value" line per check. Before the
// cancellation it prints "cancel: waiting" and reads a line from stdin,
// which the test sends once the bridge reports the call in flight at the
// server.

import { createInterface } from "node:readline";

import { Client, isDenied } from "../src/index.js";

const say = (s: string) => process.stdout.write(s + "\n");

const c = await Client.fromEnv();
say("servers: " + [...c.servers].sort().join(","));

// Three calls at once on the one connection.
const [echo, content, add] = await Promise.all([
  c.call("t", "echo", { text: "hello e2e" }),
  c.call("t", "content"),
  c.call("t", "add", { a: 40, b: 2 }),
]);
say(`echo: ${echo.text()} is_error=${echo.isError}`);
say("content: " + content.content.map((b) => (b.kind === "text" ? "text" : b.type === "other" ? "other:" + b.kind : b.type)).join(","));
say("structured: kinds=" + (content.structured as { kinds: string[] }).kinds.join(","));
say(`add: ${add.text()} sum=${(add.structured as { sum: number }).sum}`);

const fail = await c.call("t", "fail", { message: "as asked" });
say(`fail: ${fail.text()} is_error=${fail.isError}`);

try {
  await c.call("t", "content", { blob: { bytes: Uint8Array.of(1, 2, 3) } });
  say("denied: none");
} catch (e) {
  say(isDenied(e) ? `denied: ${e.code} at ${e.path}` : "denied: " + String(e));
}

// Every kind of block: an image's bytes, a link followed to its resource.
const image = content.content.find((b) => b.kind === "image");
say(`image: ${image?.mime} ${image?.data?.length} bytes`);
const link = content.content.find((b) => b.kind === "resource_link");
const linked = await c.readResource("t", link?.uri ?? "");
say(`link: ${link?.uri} read: ${linked.content[0]?.text}`);

// An argument that breaks the tool's schema is refused before the server.
try {
  await c.call("t", "add", { a: "forty", b: 2 });
  say("schema: none");
} catch (e) {
  say(isDenied(e) ? `schema: ${e.code} at ${e.path}` : "schema: " + String(e));
}
// describe and search, from inside the grant.
say("describe: " + ((await c.describe("t", ["echo"])).includes("echo(") ? "echo" : "?"));
say("search: " + ((await c.search("echo", 1))[0]?.tool ?? "none"));
// A call started in the background, collected later.
const handle = await c.start("t", "echo", { text: "later" });
say("collected: " + (await c.collect(handle)).text());

const ac = new AbortController();
const hang = c.call("t", "hang", {}, { signal: ac.signal });
say("cancel: waiting");
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line === "go") break;
}
lines.close();
ac.abort(new Error("gave up"));
try {
  await hang;
  say("cancel: answered");
} catch (e) {
  say("cancel: " + (e as Error).message);
}
// The server saw the call cancelled: capbridge relayed the cancel.
for (;;) {
  const r = await c.call("t", "cancellations");
  const seen = (r.structured as { cancelled: Array<{ tool: string }> }).cancelled.map((x) => x.tool);
  if (seen.length > 0) {
    say("cancelled at the server: " + seen.join(","));
    break;
  }
  await new Promise((r) => setTimeout(r, 20));
}

try {
  await c.call("t", "slow", { ms: 0 });
  say("not_granted: none");
} catch (e) {
  say(isDenied(e) ? `not_granted: ${e.code}` : "not_granted: " + String(e));
}
c.close();

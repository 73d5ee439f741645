import * as capwire from "@capbridge/capwire";
import * as filesystem from "./filesystem.js";

function text(r: capwire.Result): string {
  if (r.isError) throw new Error(r.text());
  return r.text();
}

const dir = text(await filesystem.listAllowedDirectories())
  .split("\n")
  .map((l) => l.trim())
  .find((l) => l.startsWith("/"));
if (dir === undefined) throw new Error("no allowed directory");
const path = `${dir}/hello.txt`;
text(await filesystem.writeFile({ path, content: "hello, capbridge" }));
console.log(text(await filesystem.readTextFile({ path })));
for (const line of text(await filesystem.listDirectory({ path: dir })).split("\n")) {
  if (line.includes("hello.txt")) console.log(line);
}
(await capwire.shared()).close();

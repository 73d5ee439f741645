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
const path = `${dir}/todo.txt`;
text(await filesystem.writeFile({ path, content: "a\nb\nc" }));
text(await filesystem.editFile({ path, edits: [{ oldText: "b", newText: "B" }] }));
console.log(text(await filesystem.readTextFile({ path })).replace(/\n+$/, "").split("\n").join(","));
(await capwire.shared()).close();

import * as capwire from "@capbridge/capwire";
import * as memory from "./memory.js";

const r = await memory.searchNodes({ query: "analytical" });
if (r.isError) throw new Error(r.text());
for (const e of memory.decodeSearchNodes(r).entities) {
  console.log(e.name);
}
(await capwire.shared()).close();

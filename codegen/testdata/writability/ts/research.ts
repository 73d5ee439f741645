import * as capwire from "@capbridge/capwire";
import * as everything from "./everything.js";

const r = await everything.simulateResearchQuery({ topic: "writability" });
if (r.isError) throw new Error(r.text());
console.log(r.text().split("\n")[0]);
(await capwire.shared()).close();

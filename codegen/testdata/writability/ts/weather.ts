import * as capwire from "@capbridge/capwire";
import * as everything from "./everything.js";

const r = await everything.getStructuredContent({ location: "Chicago" });
if (r.isError) throw new Error(r.text());
const w = everything.decodeGetStructuredContent(r);
console.log(`temperature=${w.temperature.toFixed(1)} humidity=${w.humidity.toFixed(1)}`);
(await capwire.shared()).close();

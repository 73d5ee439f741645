import * as capwire from "@capbridge/capwire";
import * as everything from "./everything.js";

const r = await everything.getSum({ a: 19.5, b: 22.5 });
if (r.isError) throw new Error(r.text());
console.log(r.text());
(await capwire.shared()).close();

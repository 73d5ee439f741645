import * as capwire from "@capbridge/capwire";
import * as everything from "./everything.js";

const r = await everything.getResourceLinks({ count: 2 });
if (r.isError) throw new Error(r.text());
const link = r.content.find((b) => b.kind === "resource_link");
if (link === undefined || link.uri === undefined) throw new Error("no resource link in the result");
console.log(`${link.uri} ${link.name}`);
const res = await capwire.readResource("everything", link.uri);
const c = res.content.find((b) => b.kind === "resource");
if (c === undefined) throw new Error("the resource holds no contents");
const body = c.text ?? (c.data !== undefined ? new TextDecoder().decode(c.data) : "");
console.log(body.split("\n")[0]);
(await capwire.shared()).close();

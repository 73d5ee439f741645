import * as capwire from "@capbridge/capwire";
import * as everything from "./everything.js";

const r = await everything.getTinyImage();
if (r.isError) throw new Error(r.text());
const img = r.content.find((b) => b.kind === "image");
if (img === undefined) throw new Error("no image in the result");
if (img.data === undefined) throw new Error(`image of ${img.size} bytes not carried`);
const png = img.data[0] === 0x89 && img.data[1] === 0x50 && img.data[2] === 0x4e && img.data[3] === 0x47;
console.log(`${img.mime} ${img.data.length} ${png}`);
(await capwire.shared()).close();

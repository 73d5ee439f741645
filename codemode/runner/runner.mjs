// capbridge's TypeScript runner: imports the program (types already
// stripped), writes its default export to the result channel (file
// descriptor 4) as JSON, and exits, so an open capwire connection cannot
// keep the run alive once the program's top level has settled.
import { writeSync } from "node:fs";

let code = 0;
try {
  const mod = await import("/work/main.js");
  let value = mod.default;
  if (value !== undefined) {
    value = await value;
    const text = JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? v.toString() : v));
    if (text !== undefined) writeSync(4, text);
  }
} catch (err) {
  code = 1;
  const text = err && typeof err === "object" && "stack" in err ? String(err.stack) : String(err);
  writeSync(2, "uncaught: " + text + "\n");
}
process.exit(code);

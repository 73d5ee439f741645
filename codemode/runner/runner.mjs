// capbridge's TypeScript runner: imports the program (types already
// stripped), writes its default export to the result channel (file
// descriptor 4) as JSON, and exits, so an open capwire connection cannot
// keep the run alive once the program's top level has settled.
//
// Warm (CAPBRIDGE_WARM set): it starts before its program exists, loads
// the client, says so with one byte on descriptor 3, then waits there for
// its environment (the run's token), a JSON array of "KEY=value" that the
// jail's init writes once the program is in /work.
import { readFileSync, writeSync } from "node:fs";

if (process.env.CAPBRIDGE_WARM) {
  await import("@capbridge/capwire");
  writeSync(3, "r");
  for (const kv of JSON.parse(readFileSync(3, "utf8"))) {
    const i = kv.indexOf("=");
    process.env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  delete process.env.CAPBRIDGE_WARM;
}

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

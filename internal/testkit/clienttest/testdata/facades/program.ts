// The façade end-to-end program the Go test internal/testkit/clienttest runs
// against a real bridge: it calls the tools of server-everything and of
// mcptest ("t") through the TypeScript façades fetched from the control
// plane, dialing with nothing but CAPBRIDGE_SOCKET and CAPBRIDGE_TOKEN,
// and prints one "what: value" line per check. Before the cancellation
// it prints "cancel: waiting" and reads a line from stdin, which the test
// sends once the bridge reports the call in flight at the server.

import { createInterface } from "node:readline";

import * as capwire from "@capbridge/capwire";

import * as everything from "./everything.js";
import * as t from "./t.js";

function say(s: string): void {
  process.stdout.write(s + "\n");
}

const blocks = (r: capwire.Result) =>
  r.content.map((b) => (b.kind === "text" ? "text" : b.type === "other" ? "other:" + b.kind : b.type)).join(",");

const c = await capwire.shared();
say("servers: " + [...c.servers].sort().join(","));

const echo = await everything.echo({ message: "hello façade" });
say(`echo: ${echo.text()} is_error=${echo.isError}`);
say("image: " + blocks(await everything.getTinyImage()));
const w = everything.decodeGetStructuredContent(await everything.getStructuredContent({ location: "Chicago" }));
say(`weather: temperature=${w.temperature.toFixed(1)} humidity=${w.humidity.toFixed(1)} conditions=${w.conditions}`);
// A tool that runs as an MCP task: the call waits for the task's result.
say("task: " + (await everything.simulateResearchQuery({ topic: "façades" })).text().split("\n")[0]);

const sum: number = t.decodeAdd(await t.add({ a: 40, b: 2 })).sum;
say(`add: sum=${sum}`);

const fail = await t.fail({ message: "as asked" });
say(`fail: ${fail.text()} is_error=${fail.isError}`);

try {
  // blob is an open object, so its values are unknown: binary data is
  // legal TypeScript, and capbridge refuses it as arguments.
  await t.content({ blob: { bytes: Uint8Array.of(1, 2, 3) } });
  say("denied: none");
} catch (e) {
  say(capwire.isDenied(e) ? `denied: ${e.code} at ${e.path}` : "denied: " + String(e));
}

try {
  const kinds: number[] = t.decodeContent(await t.content({})).kinds;
  say("mismatch: none " + kinds.join(","));
} catch (e) {
  say(e instanceof capwire.DecodeError ? `mismatch: at ${e.path} want ${e.want} got ${e.got}` : "mismatch: " + String(e));
}

// Cancellations the server saw before this program's: another may have run.
const before = t.decodeCancellations(await t.cancellations()).cancelled.length;
const ac = new AbortController();
const hang = t.hang({ signal: ac.signal });
say("cancel: waiting");
const lines = createInterface({ input: process.stdin });
for await (const line of lines) {
  if (line === "go") break;
}
lines.close();
ac.abort(new Error("gave up"));
try {
  await hang;
  say("cancel: answered");
} catch (e) {
  say("cancel: " + (e as Error).message);
}
// The server saw the call cancelled: capbridge relayed the cancel, which
// reaches the server after the call gave up here, so ask until it has.
for (;;) {
  const seen = t.decodeCancellations(await t.cancellations()).cancelled.slice(before).map((x) => x.tool);
  if (seen.length > 0) {
    say("cancelled at the server: " + seen.join(","));
    break;
  }
  await new Promise((r) => setTimeout(r, 20));
}

try {
  await t.slow({ ms: 0 });
  say("not_granted: none");
} catch (e) {
  say(capwire.isDenied(e) ? `not_granted: ${e.code}` : "not_granted: " + String(e));
}
c.close();

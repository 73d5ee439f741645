// The worked example in docs/capwire.md is what this client writes and
// reads, byte for byte, and the spec's code tables are this package's.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { Denial, Fatal, FrameReader, Result, decode, defaultMaxFrame, encodeArgs, encodeCall, retryable } from "../src/index.js";

// The Go test that runs these names the spec; run by hand from
// capwire/ts, the compiled file sits in dist/test.
const specPath = process.env["CAPWIRE_SPEC"] ?? new URL("../../../../docs/capwire.md", import.meta.url).pathname;
const spec = readFileSync(specPath, "utf8");

/** The spec's ```capwire-frame NAME blocks, "# ..." comments stripped. */
function specFrames(): Map<string, Uint8Array> {
  const out = new Map<string, Uint8Array>();
  let name: string | undefined;
  let hex = "";
  for (const line of spec.split("\n")) {
    if (line.startsWith("```capwire-frame ")) {
      name = line.slice("```capwire-frame ".length);
      hex = "";
    } else if (name !== undefined && line === "```") {
      assert.match(hex, /^([0-9a-f]{2})+$/, `block ${name}`);
      out.set(name, Uint8Array.from(Buffer.from(hex, "hex")));
      name = undefined;
    } else if (name !== undefined) {
      const i = line.indexOf("#");
      hex += (i >= 0 ? line.slice(0, i) : line).replaceAll(" ", "");
    }
  }
  return out;
}

test("spec shows exactly the call and result frames", () => {
  assert.deepEqual([...specFrames().keys()].sort(), ["call", "result"]);
});

test("call frame encodes byte for byte", () => {
  const want = specFrames().get("call")!;
  const got = encodeCall(1, "mcp.github", "create_issue", encodeArgs({ title: "Crash on start", labels: ["bug"] }), 30000, defaultMaxFrame);
  assert.equal(Buffer.from(got).toString("hex"), Buffer.from(want).toString("hex"));
});

test("result frame decodes to the spec's result", () => {
  const frame = specFrames().get("result")!;
  const payloads = new FrameReader(defaultMaxFrame).push(frame);
  assert.equal(payloads.length, 1);
  const m = decode(payloads[0]!);
  assert.deepEqual(m, {
    t: "result",
    id: 1,
    result: new Result({
      isError: false,
      content: [
        { type: "text", kind: "text", text: "Created issue #42" },
        { type: "other", kind: "image" },
      ],
      structured: { number: 42 },
      truncated: false,
    }),
  });
  assert.ok(m.t === "result");
  assert.equal(m.result.text(), "Created issue #42");
});

test("code tables list exactly this package's codes and retry verdicts", () => {
  const known = new Map<string, boolean>();
  for (const c of Object.values(Denial)) known.set(c, retryable(c));
  for (const c of Object.values(Fatal)) known.set(c, retryable(c));
  const listed = new Set<string>();
  for (const line of spec.split("\n")) {
    const cells = line.trim().split("|");
    if (cells.length !== 5 || !cells[1]!.trim().startsWith("`")) continue;
    const code = cells[1]!.trim().replaceAll("`", "");
    assert.ok(!listed.has(code), `${code} listed twice`);
    listed.add(code);
    assert.ok(known.has(code), `spec lists ${code}, which the client does not know`);
    assert.equal(cells[3]!.trim().startsWith("yes"), known.get(code), `${code}: retry verdict`);
  }
  assert.deepEqual([...listed].sort(), [...known.keys()].sort());
});

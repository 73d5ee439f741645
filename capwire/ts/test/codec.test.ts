// The codec's refusals, the same the Go codec makes: hostile bytes give a
// WireError saying whether the connection can go on, never anything else.

import assert from "node:assert/strict";
import { test } from "node:test";

import { encode } from "@msgpack/msgpack";

import { FrameReader, WireError, decode, encodeArgs, hasCode, isFatalCode, retryable } from "../src/index.js";

function wireError(f: () => unknown): WireError {
  try {
    f();
  } catch (e) {
    assert.ok(e instanceof WireError, `want a WireError, got ${String(e)}`);
    return e;
  }
  assert.fail("no error");
}

const b = (...xs: number[]) => Uint8Array.from(xs);
const cat = (...ps: Uint8Array[]) => Uint8Array.from(Buffer.concat(ps));

test("frame reader reassembles frames split anywhere", () => {
  const one = cat(b(0, 0, 0, 3), b(0x81, 0xa1, 0x74));
  const stream = cat(one, one);
  const fr = new FrameReader(16);
  const got: Uint8Array[] = [];
  for (const x of stream) got.push(...fr.push(b(x)));
  assert.equal(got.length, 2);
  assert.deepEqual([...got[1]!], [0x81, 0xa1, 0x74]);
  assert.equal(fr.endFault(), undefined);
});

test("frame reader refuses zero and oversized lengths before the payload", () => {
  assert.equal(wireError(() => new FrameReader(16).push(b(0, 0, 0, 0))).code, "bad_frame");
  const e = wireError(() => new FrameReader(16).push(b(0, 0, 0, 17)));
  assert.equal(e.code, "frame_too_large");
  assert.ok(e.fatal);
  // 4 GiB announced, nothing sent: refused from the prefix alone.
  assert.equal(wireError(() => new FrameReader(16 << 20).push(b(0xff, 0xff, 0xff, 0xff))).code, "frame_too_large");
});

test("frame reader reports a stream ending inside a frame", () => {
  const inPrefix = new FrameReader(16);
  inPrefix.push(b(0, 0));
  assert.equal(inPrefix.endFault()?.code, "bad_frame");
  const inPayload = new FrameReader(16);
  inPayload.push(b(0, 0, 0, 5, 0x81));
  assert.equal(inPayload.endFault()?.code, "bad_frame");
});

const result = (extra: Record<string, unknown> = {}) =>
  encode({ t: "result", id: 7, is_error: false, content: [{ type: "text", text: "hi" }], ...extra });

test("decode: broken payloads are fatal bad_frame", () => {
  const cases: Array<[string, Uint8Array]> = [
    ["not a map", encode([1, 2])],
    ["0xc1", b(0xc1)],
    ["trailing bytes", cat(encode({ t: "fatal", code: "bad_token" }), b(0xc0))],
    ["count beyond the bytes", b(0xdf, 0xff, 0xff, 0xff, 0xff, 0xa1, 0x74)],
    ["string past the end", b(0x81, 0xa1, 0x74, 0xdb, 0xff, 0xff, 0xff, 0xff, 0x61)],
    ["array count beyond the bytes", b(0x81, 0xa1, 0x74, 0xdd, 0x7f, 0xff, 0xff, 0xff)],
  ];
  for (const [name, p] of cases) {
    const e = wireError(() => decode(p));
    assert.equal(e.code, "bad_frame", name);
    assert.ok(e.fatal, name);
  }
});

test("decode: malformed envelopes are bad_request with the id recovered", () => {
  // The faulty field stands before the id: the scan still finds it.
  const dupKey = cat(b(0x85), encode("t"), encode("result"), encode("is_error"), encode(false), encode("is_error"), encode(true),
    encode("content"), encode([]), encode("id"), encode(9));
  const nonStringKey = cat(b(0x83), encode("t"), encode("denied"), encode(1), encode(2), encode("id"), encode(4));
  const cases: Array<[string, Uint8Array, string, number | undefined]> = [
    ["duplicate key", dupKey, "/is_error", 9],
    ["non-string key", nonStringKey, "", 4],
    ["missing t", encode({ id: 3 }), "", 3],
    ["unknown t", encode({ t: "gossip", id: 3 }), "/t", 3],
    ["wrong type", result({ is_error: "no" }), "/is_error", 7],
    ["invalid UTF-8 text", cat(b(0x84), encode("t"), encode("result"), encode("id"), encode(7), encode("is_error"), encode(false),
      encode("content"), b(0x91, 0x82), encode("type"), encode("text"), encode("text"), b(0xa1, 0xff)), "/content/0/text", 7],
    ["block without type", result({ content: [{ text: "x" }] }), "/content/0", 7],
    ["text block without text", result({ content: [{ type: "text" }] }), "/content/0", 7],
    ["other block without kind", result({ content: [{ type: "other" }] }), "/content/0", 7],
    ["block data a string", result({ content: [{ type: "other", kind: "image", data: "iVBOR" }] }), "/content/0/data", 7],
    ["block size negative", result({ content: [{ type: "other", kind: "image", size: -1 }] }), "/content/0/size", 7],
    ["denied without code", encode({ t: "denied", id: 5 }), "", 5],
    ["negative id", encode({ t: "result", id: -1, is_error: false, content: [] }), "/id", undefined],
  ];
  for (const [name, p, path, id] of cases) {
    const e = wireError(() => decode(p));
    assert.equal(e.code, "bad_request", name);
    assert.equal(e.fatal, false, name);
    assert.equal(e.path, path, name);
    assert.equal(e.id, id, name);
    assert.ok(hasCode(e, "bad_request"), name);
  }
});

/** n nested single-element arrays around 0. */
function nested(n: number): Uint8Array {
  return cat(new Uint8Array(n).fill(0x91), b(0));
}

test("decode: nesting is bounded at 128 levels, counted from the field's value", () => {
  const at = (n: number) => cat(b(0x85), encode("t"), encode("result"), encode("id"), encode(2), encode("is_error"), encode(false),
    encode("content"), b(0x90), encode("structured"), nested(n));
  const ok = decode(at(128));
  assert.equal(ok.t, "result");
  const e = wireError(() => decode(at(129)));
  assert.equal(e.code, "bad_request");
  assert.equal(e.path, "/structured");
  assert.equal(e.id, 2);
  // Far deeper than any stack: walked flat, still bounded by the bytes.
  assert.equal(wireError(() => decode(at(1_000_000))).code, "bad_request");
});

test("decode: unknown keys and block types are kept to what v1 knows", () => {
  const m = decode(result({ extra: { any: [1, 2] }, content: [{ type: "hologram", depth: 3 }], truncated: null }));
  assert.ok(m.t === "result");
  assert.deepEqual(m.result.content, [{ type: "hologram", kind: "" }]);
  assert.equal(m.result.truncated, false);
  assert.equal(m.result.structured, undefined);
});

test("decode: a signed format holding a non-negative value is a uint; rpc_code may be negative", () => {
  const m = decode(cat(b(0x85), encode("t"), encode("denied"), encode("id"), b(0xd0, 0x05), encode("code"), encode("server_error"),
    encode("message"), encode("boom"), encode("rpc_code"), encode(-32603)));
  assert.deepEqual(m, { t: "denied", id: 5, code: "server_error", message: "boom", path: "", rpcCode: -32603, quota: "", retryMs: undefined });
});

test("encodeArgs: maps only, JSON-like values and binary data", () => {
  assert.deepEqual([...encodeArgs(undefined)], [0x80]);
  assert.deepEqual([...encodeArgs(null)], [0x80]);
  assert.deepEqual([...encodeArgs({ b: Uint8Array.of(1), skip: undefined })], [0x81, 0xa1, 0x62, 0xc4, 0x01, 0x01]);
  assert.deepEqual([...encodeArgs({ n: 2n ** 63n })], [0x81, 0xa1, 0x6e, 0xcf, 0x80, 0, 0, 0, 0, 0, 0, 0]);
  for (const bad of [[1], "x", 3, Uint8Array.of(0x80)]) assert.throws(() => encodeArgs(bad), TypeError);
  assert.throws(() => encodeArgs({ m: new Map([["a", 1]]) }), /args at "\/m": cannot send a Map/);
  assert.throws(() => encodeArgs({ d: new Date(0) }), TypeError);
  assert.throws(() => encodeArgs({ f: () => 1 }), TypeError);
  let deep: unknown = 0;
  for (let i = 0; i < 128; i++) deep = [deep];
  assert.doesNotThrow(() => encodeArgs({ x: 0, deep: (deep as unknown[])[0] }));
  assert.throws(() => encodeArgs({ deep }), /deeper than 128/);
  const cyclic: Record<string, unknown> = {};
  cyclic["self"] = cyclic;
  assert.throws(() => encodeArgs(cyclic), /deeper than 128/);
});

test("code predicates", () => {
  assert.ok(retryable("timeout") && retryable("overloaded") && retryable("server_unavailable"));
  assert.ok(!retryable("server_error") && !retryable("no_such_code") && !retryable("bad_token"));
  assert.ok(isFatalCode("bad_token") && !isFatalCode("timeout"));
});

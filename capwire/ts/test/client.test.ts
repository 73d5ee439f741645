// The Client against a scripted capbridge on a real Unix socket:
// multiplexing, cancellation, deadlines, denials, and hostile frames that
// must end in a typed error, never a hang.

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import { decode as unpack, encode as pack } from "@msgpack/msgpack";

import { Client, ClosedError, DeniedError, FatalError, FrameReader, WireError, hasCode, isClosed, isDenied } from "../src/index.js";

const dir = mkdtempSync(join(tmpdir(), "cw"));
after(() => rmSync(dir, { recursive: true, force: true }));
let nsock = 0;

type Msg = Record<string, unknown>;

/** One accepted connection of the scripted capbridge. */
class Peer {
  readonly got: Msg[] = [];
  private waits: Array<{ n: number; go(): void }> = [];
  constructor(readonly sock: net.Socket) {}
  send(m: Msg): void {
    this.raw(frameOf(pack(m)));
  }
  raw(p: Uint8Array): void {
    this.sock.write(p);
  }
  /** Resolves once n frames have arrived in all. */
  frames(n: number): Promise<void> {
    if (this.got.length >= n) return Promise.resolve();
    return new Promise((go) => this.waits.push({ n, go }));
  }
  took(m: Msg): void {
    this.got.push(m);
    this.waits = this.waits.filter((w) => (this.got.length >= w.n ? (w.go(), false) : true));
  }
}

function frameOf(p: Uint8Array): Uint8Array {
  const f = new Uint8Array(4 + p.length);
  new DataView(f.buffer).setUint32(0, p.length);
  f.set(p, 4);
  return f;
}

/**
 * Serves one connection: welcomes any hello, then gives every later frame
 * to onFrame. Returns the socket path and the peer once connected.
 */
async function capbridge(onFrame: (p: Peer, m: Msg) => void, welcome: Msg = { t: "welcome", v: 1, servers: ["t"] }) {
  const path = join(dir, `s${nsock++}.sock`);
  let peer!: (p: Peer) => void;
  const connected = new Promise<Peer>((r) => (peer = r));
  const srv = net.createServer((sock) => {
    const p = new Peer(sock);
    const fr = new FrameReader(1 << 20);
    sock.on("error", () => {});
    sock.on("data", (chunk) => {
      for (const f of fr.push(chunk)) {
        const m = unpack(f) as Msg;
        if (m["t"] === "hello") {
          p.send(welcome);
          peer(p);
          continue;
        }
        p.took(m);
        onFrame(p, m);
      }
    });
  });
  await new Promise<void>((r) => srv.listen(path, r));
  after(() => srv.close());
  return { path, connected };
}

const text = (id: unknown, s: string): Msg => ({ t: "result", id, is_error: false, content: [{ type: "text", text: s }] });

test("dial: welcome names the servers; a fatal is a FatalError", async () => {
  const { path } = await capbridge(() => {}, { t: "welcome", v: 1, servers: ["a", "b"] });
  const c = await Client.dial(path, "tok");
  assert.deepEqual(c.servers, ["a", "b"]);
  c.close();

  const refused = await capbridge(() => {}, { t: "fatal", code: "bad_token", message: "unknown token" });
  await assert.rejects(Client.dial(refused.path, "tok"), (e) => e instanceof FatalError && hasCode(e, "bad_token"));

  const newer = await capbridge(() => {}, { t: "welcome", v: 2, servers: [] });
  await assert.rejects(Client.dial(newer.path, "tok"), /wire version 2, want 1/);
});

test("dial: a capbridge that never welcomes is bounded by handshakeTimeoutMs and the signal", async () => {
  const path = join(dir, `mute${nsock++}.sock`);
  const srv = net.createServer(() => {});
  await new Promise<void>((r) => srv.listen(path, r));
  after(() => srv.close());
  await assert.rejects(Client.dial(path, "tok", { handshakeTimeoutMs: 50 }), /no welcome within 50 ms/);
  const ac = new AbortController();
  const p = Client.dial(path, "tok", { signal: ac.signal });
  ac.abort(new Error("gave up"));
  await assert.rejects(p, /gave up/);
});

test("calls are multiplexed and matched by id whatever the order of replies", async () => {
  const { path, connected } = await capbridge(() => {});
  const c = await Client.dial(path, "tok");
  const p = await connected;
  const calls = [0, 1, 2, 3, 4].map((i) => c.call("t", "echo", { i }));
  await p.frames(5);
  assert.deepEqual(
    p.got.map((m) => [m["t"], m["cap"], m["op"], m["args"]]),
    [0, 1, 2, 3, 4].map((i) => ["call", "mcp.t", "echo", { i }]),
  );
  for (const m of [...p.got].reverse()) p.send(text(m["id"], "r" + (m["args"] as Msg)["i"]));
  const got = await Promise.all(calls);
  assert.deepEqual(got.map((r) => r.text()), ["r0", "r1", "r2", "r3", "r4"]);
  c.close();
});

test("results carry isError, every kind of block, structured and truncated", async () => {
  const { path } = await capbridge((p, m) =>
    p.send({
      t: "result",
      id: m["id"],
      is_error: true,
      content: [
        { type: "text", text: "a" },
        { type: "other", kind: "image", mime: "image/png", data: new Uint8Array([1, 2, 3]), size: 3, later: 1 },
        { type: "text", text: "b" },
        { type: "other", kind: "resource_link", uri: "test://1", name: "one", size: 10 },
        { type: "other", kind: "audio", mime: "audio/wav", size: 9000000 },
        { type: "picture" },
      ],
      structured: { n: 1, list: ["x"] },
      truncated: true,
    }),
  );
  const c = await Client.dial(path, "tok");
  const r = await c.call("t", "x");
  assert.equal(r.isError, true);
  assert.equal(r.text(), "a\nb");
  assert.deepEqual(r.content[0], { type: "text", kind: "text", text: "a" });
  assert.deepEqual(r.content[1], { type: "other", kind: "image", mime: "image/png", data: new Uint8Array([1, 2, 3]), size: 3 });
  assert.deepEqual(r.content[3], { type: "other", kind: "resource_link", uri: "test://1", name: "one", size: 10 });
  assert.deepEqual(r.content[4], { type: "other", kind: "audio", mime: "audio/wav", size: 9000000 });
  assert.deepEqual(r.content[5], { type: "picture", kind: "" });
  assert.deepEqual(r.structured, { n: 1, list: ["x"] });
  assert.equal(r.truncated, true);
  c.close();
});

test("a denial is a DeniedError with its code, path and rpcCode; the connection lives on", async () => {
  const { path } = await capbridge((p, m) =>
    m["op"] === "bad"
      ? p.send({ t: "denied", id: m["id"], code: "bad_arguments", message: "no", path: "/blob/bytes" })
      : p.send({ t: "denied", id: m["id"], code: "server_error", message: "boom", rpc_code: -32603 }),
  );
  const c = await Client.dial(path, "tok");
  await assert.rejects(c.call("t", "bad"), (e) => isDenied(e, "bad_arguments") && e.path === "/blob/bytes" && e.detail === "no");
  await assert.rejects(c.call("t", "other"), (e) => e instanceof DeniedError && e.rpcCode === -32603 && hasCode(e, "server_error"));
  c.close();
});

test("a quota denial carries the quota and when it refills", async () => {
  const { path } = await capbridge((p, m) =>
    m["op"] === "rate"
      ? p.send({ t: "denied", id: m["id"], code: "quota_exceeded", message: "slow down", quota: "t:rate", retry_ms: 250 })
      : p.send({ t: "denied", id: m["id"], code: "quota_exceeded", message: "spent", quota: "calls" }),
  );
  const c = await Client.dial(path, "tok");
  await assert.rejects(c.call("t", "rate"), (e) => isDenied(e, "quota_exceeded") && e.quota === "t:rate" && e.retryMs === 250);
  await assert.rejects(c.call("t", "total"), (e) => isDenied(e, "quota_exceeded") && e.quota === "calls" && e.retryMs === undefined);
  c.close();
});

test("a call's traceparent option travels as the call's traceparent, and none is sent without it", async () => {
  const { path, connected } = await capbridge((p, m) => p.send({ t: "result", id: m["id"], is_error: false, content: [] }));
  const c = await Client.dial(path, "tok");
  const p = await connected;
  const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  await c.call("t", "echo", {}, { traceparent: tp });
  await c.call("t", "echo", {});
  await p.frames(2);
  assert.equal(p.got[0]!["traceparent"], tp);
  assert.equal("traceparent" in p.got[1]!, false);
  c.close();
});

test("aborting a call sends cancel for its id, rejects with the reason and drops the late reply", async () => {
  const { path, connected } = await capbridge(() => {});
  const c = await Client.dial(path, "tok");
  const p = await connected;
  const ac = new AbortController();
  const slow = c.call("t", "hang", {}, { signal: ac.signal });
  const other = c.call("t", "echo", {});
  await p.frames(2);
  ac.abort(new Error("user gave up"));
  await assert.rejects(slow, /user gave up/);
  await p.frames(3);
  const [hang, echo, cancel] = p.got;
  assert.deepEqual(cancel, { t: "cancel", id: hang!["id"] });
  p.send({ t: "denied", id: hang!["id"], code: "cancelled" }); // the late reply: dropped
  p.send(text(echo!["id"], "still fine"));
  assert.equal((await other).text(), "still fine");
  // An already aborted signal sends nothing.
  await assert.rejects(c.call("t", "x", {}, { signal: AbortSignal.abort(new Error("early")) }), /early/);
  assert.equal(p.got.length, 3);
  c.close();
});

test("timeoutMs is sent as timeout_ms and, passing here first, cancels the call", async () => {
  const { path, connected } = await capbridge(() => {});
  const c = await Client.dial(path, "tok");
  const p = await connected;
  const call = c.call("t", "hang", {}, { timeoutMs: 30 });
  await assert.rejects(call, (e) => e instanceof DOMException && e.name === "TimeoutError");
  await p.frames(2);
  assert.equal(p.got[0]!["timeout_ms"], 30);
  assert.deepEqual(p.got[1], { t: "cancel", id: p.got[0]!["id"] });
  c.close();
});

test("maxInFlight makes further calls wait for a slot", async () => {
  const { path, connected } = await capbridge(() => {});
  const c = await Client.dial(path, "tok", { maxInFlight: 2 });
  const p = await connected;
  const calls = [1, 2, 3].map((i) => c.call("t", "echo", { i }));
  await p.frames(2);
  // The third call is held back until a reply frees a slot.
  await new Promise((r) => setImmediate(r));
  assert.equal(p.got.length, 2);
  p.send(text(p.got[0]!["id"], "one"));
  await p.frames(3);
  p.send(text(p.got[1]!["id"], "two"));
  p.send(text(p.got[2]!["id"], "three"));
  assert.deepEqual((await Promise.all(calls)).map((r) => r.text()), ["one", "two", "three"]);
  c.close();
});

/** Dials, starts two calls, lets hostile run on the peer, and returns how both ended. */
async function underAttack(hostile: (p: Peer, first: Msg) => void) {
  const { path, connected } = await capbridge(() => {});
  const c = await Client.dial(path, "tok", { maxFrame: 1024 });
  const p = await connected;
  const calls = [c.call("t", "a"), c.call("t", "b")].map((x) => x.then(() => "resolved", (e: unknown) => e));
  await p.frames(2);
  hostile(p, p.got[0]!);
  const out = await Promise.all(calls);
  return { c, out };
}

const closedBy = (code: string) => (e: unknown) => isClosed(e) && hasCode(e, code) && e.cause instanceof WireError;

test("hostile frames end the connection with a typed error, never a hang", async () => {
  const cases: Array<[string, (p: Peer) => void, string]> = [
    ["oversized length", (p) => p.raw(Uint8Array.of(0, 0, 4, 1)), "frame_too_large"],
    ["zero length", (p) => p.raw(Uint8Array.of(0, 0, 0, 0)), "bad_frame"],
    ["not MessagePack", (p) => p.raw(frameOf(Uint8Array.of(0xc1))), "bad_frame"],
    ["trailing bytes", (p) => p.raw(frameOf(Uint8Array.of(0x80, 0x80))), "bad_frame"],
    ["hang-up inside a frame", (p) => (p.raw(Uint8Array.of(0, 0, 0, 9, 0x81)), p.sock.end()), "bad_frame"],
    ["over-deep frame without id", (p) => p.raw(frameOf(Uint8Array.from([0x82, 0xa1, 0x74, 0xa6, ...Buffer.from("result"), 0xa1, 0x78, ...new Array(200).fill(0x91), 0]))), "bad_request"],
  ];
  for (const [name, hostile, code] of cases) {
    const { c, out } = await underAttack(hostile);
    for (const e of out) assert.ok(closedBy(code)(e), `${name}: ${String(e)}`);
    assert.ok(c.closed, name);
    await assert.rejects(c.call("t", "after"), ClosedError, name);
  }
});

test("a fatal frame or an id-less denial fails every waiting call", async () => {
  let { out } = await underAttack((p) => p.send({ t: "fatal", code: "bad_frame", message: "yours" }));
  for (const e of out) assert.ok(isClosed(e) && e.cause instanceof FatalError && hasCode(e, "bad_frame"), String(e));
  ({ out } = await underAttack((p) => p.send({ t: "denied", code: "bad_request", message: "what id?" })));
  for (const e of out) assert.ok(isClosed(e) && hasCode(e, "bad_request"), String(e));
});

test("a malformed reply naming an id fails that call only; unknown envelope types are ignored", async () => {
  const { c, out } = await underAttack((p, first) => {
    p.send({ t: "gossip", id: first["id"] });
    p.send({ t: "result", id: first["id"], is_error: "maybe", content: [] });
    p.send(text(p.got[1]!["id"], "fine"));
  });
  assert.ok(out[0] instanceof Error && out[0].cause instanceof WireError && /malformed reply/.test(out[0].message), String(out[0]));
  assert.equal(out[1], "resolved");
  assert.ok(!c.closed);
  c.close();
});

test("close fails waiting calls with ClosedError and is idempotent", async () => {
  const { path, connected } = await capbridge(() => {});
  const c = await Client.dial(path, "tok");
  const p = await connected;
  const call = c.call("t", "hang");
  await p.frames(1);
  c.close();
  c.close();
  await assert.rejects(call, ClosedError);
});

// Envelopes (docs/capwire.md, "Envelopes"): the client's encoders (hello,
// call, cancel) and a total decoder for what capbridge sends (welcome,
// result, denied, fatal). Every input to decode gives a Message or throws
// a WireError, never anything else.

import { decode as decodeMsgpack, encode as encodeMsgpack } from "@msgpack/msgpack";

import { Denial, Fatal } from "./codes.js";
import { WireError } from "./errors.js";
import { Kind, Malformed, check, decodeUTF8, endOf, hasLoneSurrogate, maxDepth, readHead, skip, Writer, type Head } from "./msgpack.js";
import { Result, type Block } from "./result.js";

/** The wire version this package speaks. */
export const version = 1;

/** Starts every capability name in v1: a call's cap is "mcp.<server>". */
export const capPrefix = "mcp.";

/** The capability of capbridge itself: describe, search and read_resource within the grant. */
export const capBridge = "capbridge";

/** The default (and largest sensible) frame payload: 16 MiB. */
export const defaultMaxFrame = 16 << 20;

/** A decoded envelope from capbridge. */
export type Message =
  | { t: "welcome"; v: number; servers: string[] }
  | { t: "result"; id: number; result: Result }
  | { t: "denied"; id: number | undefined; code: string; message: string; path: string; rpcCode: number | undefined; quota: string; retryMs: number | undefined }
  | { t: "fatal"; code: string; message: string }
  | { t: "hello" | "call" | "cancel" };

const knownTypes: ReadonlySet<string> = new Set(["hello", "welcome", "call", "cancel", "result", "denied", "fatal"]);

/** Reports whether t is a v1 envelope type. */
export function knownType(t: string): boolean {
  return knownTypes.has(t);
}

// --- Encoding: one fixed key order per type, every value in its shortest
// form, so equal messages encode to equal bytes (the spec's worked example
// is checked byte for byte).

function checkStr(typ: string, field: string, s: string): void {
  if (hasLoneSurrogate(s)) throw new TypeError(`capwire: encoding ${typ}: ${field}: a lone surrogate has no UTF-8 form`);
}

/** A frame (length prefix and payload) holding body's map, checked against maxFrame. */
function frame(typ: string, maxFrame: number, body: (w: Writer) => void): Uint8Array {
  const w = new Writer();
  w.byte(0, 0, 0, 0);
  body(w);
  const n = w.length - 4;
  if (n > maxFrame) {
    throw new WireError({ code: Fatal.FrameTooLarge, fatal: true, msg: `encoding ${typ}: payload of ${n} bytes exceeds the limit of ${maxFrame}` });
  }
  w.u32At(0, n);
  return w.result();
}

export function encodeHello(token: string, maxFrame: number): Uint8Array {
  checkStr("hello", "token", token);
  return frame("hello", maxFrame, (w) => {
    w.mapHeader(3);
    w.str("t");
    w.str("hello");
    w.str("v");
    w.uint(version);
    w.str("token");
    w.str(token);
  });
}

export function encodeCancel(id: number, maxFrame: number): Uint8Array {
  return frame("cancel", maxFrame, (w) => {
    w.mapHeader(2);
    w.str("t");
    w.str("cancel");
    w.str("id");
    w.uint(id);
  });
}

/**
 * Encodes a call frame. args is encoded by @msgpack/msgpack (see
 * encodeArgs) straight after the head; timeoutMS 0 means none given,
 * traceparent "" none.
 */
export function encodeCall(id: number, cap: string, op: string, args: Uint8Array, timeoutMS: number, maxFrame: number, traceparent = ""): Uint8Array {
  if (cap === "" || op === "") throw new TypeError("capwire: encoding call: cap/op: must not be empty");
  checkStr("call", "cap", cap);
  checkStr("call", "op", op);
  checkStr("call", "traceparent", traceparent);
  return frame("call", maxFrame, (w) => {
    w.mapHeader(5 + (timeoutMS !== 0 ? 1 : 0) + (traceparent !== "" ? 1 : 0));
    w.str("t");
    w.str("call");
    w.str("id");
    w.uint(id);
    w.str("cap");
    w.str(cap);
    w.str("op");
    w.str(op);
    if (timeoutMS !== 0) {
      w.str("timeout_ms");
      w.uint(timeoutMS);
    }
    if (traceparent !== "") {
      w.str("traceparent");
      w.str(traceparent);
    }
    w.str("args");
    w.bytes(args);
  });
}

/**
 * Encodes a call's arguments as one MessagePack map. null and undefined
 * mean {}; a Uint8Array already holding MessagePack is not special (it is
 * binary data). Values are what JSON can say plus binary data (Uint8Array)
 * and bigint; a Map, Set, Date, class instance, function or symbol is a
 * TypeError naming where it is, since @msgpack/msgpack would silently send
 * some of them as something else. Undefined object properties are left out,
 * as JSON.stringify does.
 */
export function encodeArgs(args: unknown): Uint8Array {
  if (args === null || args === undefined) return Uint8Array.of(0x80);
  if (typeof args !== "object" || Array.isArray(args) || args instanceof Uint8Array) {
    throw new TypeError("capwire: encoding call: args: want an object");
  }
  checkValue(args, "", 1);
  const out = encodeMsgpack(args, { ignoreUndefined: true, useBigInt64: true, maxDepth: maxDepth + 1 });
  const fault = check(out);
  if (fault !== "") throw new TypeError("capwire: encoding call: args: " + fault);
  return out;
}

function checkValue(x: unknown, path: string, depth: number): void {
  const bad = (what: string): never => {
    throw new TypeError(`capwire: encoding call: args at "${path}": cannot send ${what}`);
  };
  switch (typeof x) {
    case "string":
    case "number":
    case "boolean":
    case "bigint":
    case "undefined":
      return;
    case "function":
    case "symbol":
      return bad("a " + typeof x);
  }
  if (x === null || x instanceof Uint8Array) return;
  if (depth > maxDepth) bad("a value nested deeper than " + maxDepth);
  if (Array.isArray(x)) {
    x.forEach((e, i) => checkValue(e, path + "/" + i, depth + 1));
    return;
  }
  const proto = Object.getPrototypeOf(x);
  if (proto !== Object.prototype && proto !== null) bad("a " + ((x as object).constructor?.name ?? "non-plain object"));
  for (const [k, v] of Object.entries(x as object)) checkValue(v, path + "/" + k.replaceAll("~", "~0").replaceAll("/", "~1"), depth + 1);
}

// --- Decoding: a port of the Go decoder's rules (capwire/envelope.go).

interface Span {
  at: number;
  end: number;
}

class Envelope {
  readonly fields = new Map<string, Span>();
  early: { path: string; offset: number; msg: string } | undefined;
  typ = "";
  code: string = Denial.BadRequest;
  id: number | undefined;

  constructor(readonly b: Uint8Array) {}

  fault(msg: string, path = "", offset = -1): WireError {
    return new WireError({ code: this.code, fatal: false, msg, path, offset, type: this.typ, id: this.id });
  }

  failAt(field: string, sub: string, msg: string): WireError {
    return this.fault(msg, "/" + field + sub, this.fields.get(field)?.at ?? -1);
  }

  head(field: string): Head | undefined {
    const s = this.fields.get(field);
    return s === undefined ? undefined : readHead(this.b, s.at);
  }

  require(field: string): Head {
    const h = this.head(field);
    if (h === undefined) throw this.fault(`missing "${field}"`);
    return h;
  }

  present(field: string): boolean {
    const h = this.head(field);
    return h !== undefined && h.kind !== Kind.Nil;
  }

  // An integer past 2^53 is inexact as a number; as an id it then equals
  // none of this client's ids, which count up from 1.
  uint(field: string): number {
    const h = this.require(field);
    if (h.kind !== Kind.Uint) throw this.failAt(field, "", "want an unsigned integer");
    return h.v;
  }

  bool(field: string): boolean {
    const h = this.require(field);
    if (h.kind === Kind.True) return true;
    if (h.kind === Kind.False) return false;
    throw this.failAt(field, "", "want a boolean");
  }

  strAt(i: number, field: string, sub: string): string {
    const h = readHead(this.b, i);
    if (h.kind !== Kind.Str) throw this.failAt(field, sub, "want a string");
    const s = decodeUTF8(this.b.subarray(h.off, endOf(h)));
    if (s === undefined) throw this.failAt(field, sub, "invalid UTF-8");
    return s;
  }

  str(field: string): string {
    this.require(field);
    return this.strAt(this.fields.get(field)!.at, field, "");
  }

  nonEmpty(field: string): string {
    const s = this.str(field);
    if (s === "") throw this.failAt(field, "", "must not be empty");
    return s;
  }

  optStr(field: string): string {
    return this.present(field) ? this.str(field) : "";
  }

  raw(field: string): Uint8Array {
    const s = this.fields.get(field)!;
    return this.b.subarray(s.at, s.end);
  }
}

function badFrame(offset: number, msg: string, cause?: unknown): WireError {
  const why = cause instanceof Malformed ? ": " + cause.message : "";
  return new WireError({ code: Fatal.BadFrame, fatal: true, msg: msg + why, offset });
}

function escapeKey(raw: Uint8Array): string {
  const s = decodeUTF8(raw) ?? JSON.stringify(Array.from(raw));
  return s.replaceAll("~", "~0").replaceAll("/", "~1");
}

/**
 * Decodes one frame's payload. Faults: a payload that is not exactly one
 * well-formed map is a fatal bad_frame; anything else wrong (missing or
 * unknown "t", wrong field types, nesting over 128, invalid UTF-8, a
 * duplicated key) is a non-fatal bad_request carrying the frame's id when
 * it had a usable one.
 */
export function decode(b: Uint8Array): Message {
  const e = new Envelope(b);
  scan(e);
  classify(e);
  if (e.early !== undefined) throw e.fault(e.early.msg, e.early.path, e.early.offset);
  switch (e.typ) {
    case "welcome":
      return welcome(e);
    case "result":
      return result(e);
    case "denied":
      return denied(e);
    case "fatal":
      return { t: "fatal", code: e.nonEmpty("code"), message: e.optStr("message") };
    case "hello":
    case "call":
    case "cancel":
      return { t: e.typ as "hello" | "call" | "cancel" };
  }
  throw e.failAt("t", "", "unknown envelope type " + JSON.stringify(e.typ));
}

function scan(e: Envelope): void {
  const b = e.b;
  let h: Head;
  try {
    h = readHead(b, 0);
  } catch (err) {
    throw badFrame(0, "frame is not MessagePack", err);
  }
  if (h.kind !== Kind.Map) throw badFrame(0, "frame is not a map");
  if (h.v * 2 > b.length - h.off) throw badFrame(0, "map claims more entries than the frame holds");
  let i = h.off;
  const note = (path: string, offset: number, msg: string) => {
    e.early ??= { path, offset, msg };
  };
  for (let n = h.v; n > 0; n--) {
    let kh: Head;
    let vat: number;
    try {
      kh = readHead(b, i);
      vat = endOf(kh);
      if (kh.kind !== Kind.Str) {
        vat = skip(b, i, 0).end;
        note("", i, "envelope key is not a string");
      }
    } catch (err) {
      throw badFrame(i, "bad key", err);
    }
    const key = kh.kind === Kind.Str ? b.subarray(kh.off, endOf(kh)) : undefined;
    let end: number;
    try {
      const s = skip(b, vat, 0);
      end = s.end;
      if (s.deep) note("/" + (key === undefined ? "" : escapeKey(key)), vat, "value nests deeper than " + maxDepth);
    } catch (err) {
      throw badFrame(vat, "bad value for key " + JSON.stringify(key === undefined ? "" : (decodeUTF8(key) ?? "")), err);
    }
    const name = key === undefined ? undefined : decodeUTF8(key);
    if (name !== undefined && fieldNames.has(name)) {
      if (e.fields.has(name)) note("/" + name, i, "duplicate key");
      else e.fields.set(name, { at: vat, end });
    }
    i = end;
  }
  if (i !== b.length) throw badFrame(i, `${b.length - i} bytes after the map`);
}

const fieldNames: ReadonlySet<string> = new Set([
  "t", "v", "token", "servers", "id", "cap", "op", "args", "timeout_ms",
  "is_error", "content", "structured", "truncated", "code", "message", "path", "rpc_code",
  "traceparent", "quota", "retry_ms",
]);

function classify(e: Envelope): void {
  const t = e.head("t");
  if (t !== undefined && t.kind === Kind.Str) e.typ = decodeUTF8(e.b.subarray(t.off, endOf(t))) ?? "";
  const id = e.head("id");
  if (id !== undefined && id.kind === Kind.Uint && id.exact) e.id = id.v;
  if (t === undefined) throw e.fault('missing "t"');
  if (e.typ === "") throw e.failAt("t", "", '"t" is not a non-empty UTF-8 string');
}

function welcome(e: Envelope): Message {
  const v = e.uint("v");
  const h = e.require("servers");
  if (h.kind !== Kind.Array) throw e.failAt("servers", "", "want an array");
  const servers: string[] = [];
  let i = h.off;
  for (let k = 0; k < h.v; k++) {
    servers.push(e.strAt(i, "servers", "/" + k));
    i = skip(e.b, i, 1).end;
  }
  return { t: "welcome", v, servers };
}

function result(e: Envelope): Message {
  const id = e.uint("id");
  const isError = e.bool("is_error");
  const content = blocks(e);
  let structured: unknown = undefined;
  if (e.present("structured")) {
    try {
      structured = decodeMsgpack(e.raw("structured"), { useBigInt64: false });
    } catch (err) {
      throw e.failAt("structured", "", "cannot decode: " + (err instanceof Error ? err.message : String(err)));
    }
  }
  const truncated = e.present("truncated") ? e.bool("truncated") : false;
  return { t: "result", id, result: new Result({ isError, content, structured, truncated }) };
}

type BlockKey = "type" | "text" | "kind" | "mime" | "uri" | "name";
const blockKeys = new Set(["type", "text", "kind", "mime", "uri", "name", "data", "size"]);

function blocks(e: Envelope): Block[] {
  const b = e.b;
  const h = e.require("content");
  if (h.kind !== Kind.Array) throw e.failAt("content", "", "want an array");
  const out: Block[] = [];
  let i = h.off;
  for (let k = 0; k < h.v; k++) {
    const sub = "/" + k;
    const bh = readHead(b, i);
    if (bh.kind !== Kind.Map) throw e.failAt("content", sub, "want a map");
    const got: { [key in BlockKey]?: string } = {};
    let data: Uint8Array | undefined;
    let size: number | undefined;
    const seen = new Set<string>();
    let j = bh.off;
    for (let p = 0; p < bh.v; p++) {
      const kh = readHead(b, j);
      if (kh.kind !== Kind.Str) throw e.failAt("content", sub, "block key is not a string");
      const vat = endOf(kh);
      const name = decodeUTF8(b.subarray(kh.off, vat));
      const at = sub + "/" + name;
      if (name !== undefined && blockKeys.has(name)) {
        if (seen.has(name)) throw e.failAt("content", at, "duplicate key");
        seen.add(name);
        if (name === "data") {
          const vh = readHead(b, vat);
          if (vh.kind !== Kind.Bin) throw e.failAt("content", at, "want binary data");
          data = new Uint8Array(b.subarray(vh.off, endOf(vh)));
        } else if (name === "size") {
          const vh = readHead(b, vat);
          if (vh.kind !== Kind.Uint || !vh.exact) throw e.failAt("content", at, "want an unsigned integer");
          size = vh.v;
        } else {
          got[name as BlockKey] = e.strAt(vat, "content", at);
        }
      }
      j = skip(b, vat, 2).end;
    }
    if (got.type === undefined || got.type === "") throw e.failAt("content", sub, 'block has no "type"');
    if (got.type === "text") {
      if (got.text === undefined) throw e.failAt("content", sub, 'text block has no "text"');
      out.push({ type: "text", kind: "text", text: got.text });
    } else if (got.type === "other") {
      if (got.kind === undefined || got.kind === "") throw e.failAt("content", sub, 'other block has no "kind"');
      const blk: { -readonly [k in keyof Block]: Block[k] } = { type: "other", kind: got.kind };
      if (got.text !== undefined) blk.text = got.text;
      if (got.mime !== undefined) blk.mime = got.mime;
      if (got.uri !== undefined) blk.uri = got.uri;
      if (got.name !== undefined) blk.name = got.name;
      if (data !== undefined) blk.data = data;
      if (size !== undefined) blk.size = size;
      out.push(blk);
    } else {
      // A block type from a newer capbridge: kept by its type alone.
      out.push({ type: got.type, kind: "" });
    }
    i = j;
  }
  return out;
}

function denied(e: Envelope): Message {
  const id = e.present("id") ? e.uint("id") : undefined;
  const code = e.nonEmpty("code");
  const message = e.optStr("message");
  const path = e.optStr("path");
  let rpcCode: number | undefined;
  if (e.present("rpc_code")) {
    const h = e.head("rpc_code")!;
    if (h.kind !== Kind.Uint && h.kind !== Kind.NegInt) throw e.failAt("rpc_code", "", "want an integer");
    rpcCode = h.v;
  }
  const quota = e.optStr("quota");
  const retryMs = e.present("retry_ms") ? e.uint("retry_ms") : undefined;
  return { t: "denied", id, code, message, path, rpcCode, quota, retryMs };
}

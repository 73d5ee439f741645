// The MessagePack this package reads and writes itself: headers, a
// bounded skip, and the shortest-form writers the spec's worked example
// depends on. Envelopes are scanned by hand with these (the spec's
// refusals — duplicate keys, non-string keys, nesting over 128, counts
// larger than the bytes left — need the bytes, not a decoded object);
// @msgpack/msgpack encodes args and decodes structured content once these
// have checked it.

/** The deepest nesting any capbridge decoder accepts (docs/capwire.md, "Envelopes"). */
export const maxDepth = 128;

/** MessagePack families; signed formats holding a non-negative value are Uint. */
export const Kind = {
  Nil: 1,
  False: 2,
  True: 3,
  Uint: 4,
  NegInt: 5,
  Float32: 6,
  Float64: 7,
  Str: 8,
  Bin: 9,
  Ext: 10,
  Array: 11,
  Map: 12,
} as const;
export type Kind = (typeof Kind)[keyof typeof Kind];

/**
 * The decoded header of one value. v is the integer value (Uint, NegInt;
 * exact is false when it lies outside the safe-integer range), the payload
 * length in bytes (Str, Bin; Ext counts its type byte too) or the element
 * count (Array; Map counts pairs). off is where the payload or first
 * element starts; for the other kinds it is where the next value starts.
 */
export interface Head {
  kind: Kind;
  v: number;
  exact: boolean;
  off: number;
}

/** A structural fault: the bytes are not MessagePack. */
export class Malformed extends Error {
  constructor(readonly short: boolean) {
    super(short ? "value runs past the end of the frame" : "byte 0xc1 is never used in MessagePack");
  }
}

/** The end of a value, and whether it nests deeper than maxDepth. */
export interface Span {
  end: number;
  deep: boolean;
}

const two32 = 2 ** 32;

function be(b: Uint8Array, i: number, w: number): number {
  if (w > b.length - i - 1) throw new Malformed(true);
  let v = 0;
  for (let k = 1; k <= w; k++) v = v * 256 + b[i + k]!;
  return v;
}

function payload(b: Uint8Array, kind: Kind, n: number, off: number): Head {
  if (off > b.length || n > b.length - off) throw new Malformed(true);
  return { kind, v: n, exact: true, off };
}

/** Decodes the header at b[i]; never reads past b's end. */
export function readHead(b: Uint8Array, i: number): Head {
  if (i < 0 || i >= b.length) throw new Malformed(true);
  const c = b[i]!;
  if (c <= 0x7f) return { kind: Kind.Uint, v: c, exact: true, off: i + 1 };
  if (c >= 0xe0) return { kind: Kind.NegInt, v: c - 256, exact: true, off: i + 1 };
  if (c <= 0x8f) return { kind: Kind.Map, v: c & 0x0f, exact: true, off: i + 1 };
  if (c <= 0x9f) return { kind: Kind.Array, v: c & 0x0f, exact: true, off: i + 1 };
  if (c <= 0xbf) return payload(b, Kind.Str, c & 0x1f, i + 1);
  switch (c) {
    case 0xc0:
      return { kind: Kind.Nil, v: 0, exact: true, off: i + 1 };
    case 0xc2:
      return { kind: Kind.False, v: 0, exact: true, off: i + 1 };
    case 0xc3:
      return { kind: Kind.True, v: 0, exact: true, off: i + 1 };
    case 0xc4:
    case 0xc5:
    case 0xc6: {
      const w = 1 << (c - 0xc4);
      return payload(b, Kind.Bin, be(b, i, w), i + 1 + w);
    }
    case 0xd9:
    case 0xda:
    case 0xdb: {
      const w = 1 << (c - 0xd9);
      return payload(b, Kind.Str, be(b, i, w), i + 1 + w);
    }
    case 0xc7:
    case 0xc8:
    case 0xc9: {
      const w = 1 << (c - 0xc7);
      return payload(b, Kind.Ext, be(b, i, w) + 1, i + 1 + w);
    }
    case 0xca:
      if (b.length - i < 5) throw new Malformed(true);
      return { kind: Kind.Float32, v: 0, exact: true, off: i + 5 };
    case 0xcb:
      if (b.length - i < 9) throw new Malformed(true);
      return { kind: Kind.Float64, v: 0, exact: true, off: i + 9 };
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf:
      return uint(b, i, 1 << (c - 0xcc));
    case 0xd0:
    case 0xd1:
    case 0xd2:
    case 0xd3:
      return int(b, i, 1 << (c - 0xd0));
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8:
      return payload(b, Kind.Ext, 1 + (1 << (c - 0xd4)), i + 1);
    case 0xdc:
    case 0xdd: {
      const w = 2 << (c - 0xdc);
      return { kind: Kind.Array, v: be(b, i, w), exact: true, off: i + 1 + w };
    }
    case 0xde:
    case 0xdf: {
      const w = 2 << (c - 0xde);
      return { kind: Kind.Map, v: be(b, i, w), exact: true, off: i + 1 + w };
    }
  }
  throw new Malformed(false); // 0xc1
}

function uint(b: Uint8Array, i: number, w: number): Head {
  const v = be(b, i, w);
  return { kind: Kind.Uint, v, exact: Number.isSafeInteger(v), off: i + 1 + w };
}

function int(b: Uint8Array, i: number, w: number): Head {
  let v = be(b, i, w);
  if (b[i + 1]! >= 0x80) {
    // Two's complement: subtract 2^(8w). For w = 8 the float arithmetic is
    // inexact past 2^53, which exact reports.
    v -= 2 ** (8 * w);
    return { kind: Kind.NegInt, v, exact: Number.isSafeInteger(v), off: i + 1 + w };
  }
  return { kind: Kind.Uint, v, exact: Number.isSafeInteger(v), off: i + 1 + w };
}

/** The offset just past a value whose header is h (not Array or Map). */
export function endOf(h: Head): number {
  return h.kind === Kind.Str || h.kind === Kind.Bin || h.kind === Kind.Ext ? h.off + h.v : h.off;
}

/**
 * Returns the end of the value at b[i], checking that it is well formed;
 * depth is the number of containers already open around it. A container
 * opened at depth maxDepth is walked flat to its end and reported deep, so
 * a caller can report the limit and still read on. Every count is checked
 * against the bytes left before it is looped over, so the work is bounded
 * by b's length and the recursion by maxDepth.
 */
export function skip(b: Uint8Array, i: number, depth: number): Span {
  const h = readHead(b, i);
  if (h.kind !== Kind.Array && h.kind !== Kind.Map) return { end: endOf(h), deep: false };
  if (depth >= maxDepth) return { end: skipFlat(b, i), deep: true };
  let n = h.kind === Kind.Map ? 2 * h.v : h.v;
  // Every element takes at least one byte: a larger count is a lie.
  if (n > b.length - h.off) throw new Malformed(true);
  let j = h.off;
  let deep = false;
  for (; n > 0; n--) {
    const s = skip(b, j, depth + 1);
    j = s.end;
    deep ||= s.deep;
  }
  return { end: j, deep };
}

function skipFlat(b: Uint8Array, i: number): number {
  for (let pending = 1; pending > 0; pending--) {
    const h = readHead(b, i);
    if (h.kind === Kind.Array) pending += h.v;
    else if (h.kind === Kind.Map) pending += 2 * h.v;
    i = endOf(h);
    if (pending - 1 > b.length - i) throw new Malformed(true);
  }
  return i;
}

/**
 * Checks that raw is exactly one well-formed value no deeper than
 * maxDepth; returns a description of the fault, or "" when it is sound.
 */
export function check(raw: Uint8Array): string {
  try {
    const s = skip(raw, 0, 0);
    if (s.deep) return "nesting deeper than " + maxDepth;
    if (s.end !== raw.length) return "bytes after the value";
    return "";
  } catch (e) {
    if (e instanceof Malformed) return e.message;
    throw e;
  }
}

/** A growable byte buffer for the shortest-form writers below. */
export class Writer {
  private buf = new Uint8Array(256);
  length = 0;

  private room(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
  }

  byte(...bs: number[]): void {
    this.room(bs.length);
    for (const x of bs) this.buf[this.length++] = x;
  }

  bytes(p: Uint8Array): void {
    this.room(p.length);
    this.buf.set(p, this.length);
    this.length += p.length;
  }

  /** Writes n as a big-endian u32 at offset at (a length prefix reserved earlier). */
  u32At(at: number, n: number): void {
    this.buf[at] = n >>> 24;
    this.buf[at + 1] = (n >>> 16) & 0xff;
    this.buf[at + 2] = (n >>> 8) & 0xff;
    this.buf[at + 3] = n & 0xff;
  }

  str(s: string): void {
    const p = utf8.encode(s);
    const n = p.length;
    if (n <= 31) this.byte(0xa0 | n);
    else if (n <= 0xff) this.byte(0xd9, n);
    else if (n <= 0xffff) this.byte(0xda, n >>> 8, n & 0xff);
    else this.byte(0xdb, n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
    this.bytes(p);
  }

  /** Writes a non-negative safe integer in its shortest unsigned form. */
  uint(v: number): void {
    if (v <= 0x7f) this.byte(v);
    else if (v <= 0xff) this.byte(0xcc, v);
    else if (v <= 0xffff) this.byte(0xcd, v >>> 8, v & 0xff);
    else if (v < two32) this.byte(0xce, v >>> 24, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff);
    else {
      const hi = Math.floor(v / two32);
      const lo = v >>> 0;
      this.byte(0xcf, hi >>> 24, (hi >>> 16) & 0xff, (hi >>> 8) & 0xff, hi & 0xff, lo >>> 24, (lo >>> 16) & 0xff, (lo >>> 8) & 0xff, lo & 0xff);
    }
  }

  mapHeader(n: number): void {
    if (n > 15) throw new Error("capwire: envelope maps have at most 15 entries");
    this.byte(0x80 | n);
  }

  result(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }
}

const utf8 = new TextEncoder();
const strictUTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Decodes UTF-8, or returns undefined for invalid bytes. */
export function decodeUTF8(p: Uint8Array): string | undefined {
  try {
    return strictUTF8.decode(p);
  } catch {
    return undefined;
  }
}

/** Reports whether s holds a lone surrogate, which has no UTF-8 form. */
export function hasLoneSurrogate(s: string): boolean {
  return /\p{Cs}/u.test(s);
}

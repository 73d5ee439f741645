// Checked decoding of structured content: what Go's Result.Decode is to a
// Go type, decodeStructured is to a façade's output type. A generated
// façade describes its output types as Shapes, data the generator writes
// from the same type plan as the declarations, and its decode helpers
// hand them here; the checking code lives once, in this package.

import { CapwireError } from "./errors.js";
import type { Result } from "./result.js";

/**
 * The type of a value, as a façade describes it:
 *
 * - "string", "integer", "number", "boolean", or "any" (any value);
 * - any other string: the type of that name in the façade's Shapes;
 * - ["list", T], ["map", T] (an object whose every value is a T),
 *   ["nullable", T] (null or a T);
 * - ["record", required, optional]: an object with the required keys, each
 *   holding its type, and the optional keys holding theirs when present;
 *   other keys are allowed, as a newer server may add them;
 * - ["enum", values]: one of the values;
 * - ["union", variants]: a value of at least one of the variants.
 */
export type Shape =
  | string
  | readonly ["list" | "map" | "nullable", Shape]
  | readonly ["record", readonly Field[], readonly Field[]]
  | readonly ["enum", readonly (string | number)[]]
  | readonly ["union", readonly Shape[]];

/** A record's key and the shape of its value. */
export type Field = readonly [string, Shape];

/** A façade's named types, by name. */
export interface Shapes {
  readonly [name: string]: Shape;
}

/**
 * Structured content that does not fit the type a decode helper was given.
 * path is an RFC 6901 pointer into the content ("" for the whole value),
 * want the type expected there, got what the content holds.
 */
export class DecodeError extends CapwireError {
  override name = "DecodeError";
  readonly path: string;
  readonly want: string;
  readonly got: string;

  constructor(path: string, want: string, got: string) {
    super(`capwire: structured content at ${JSON.stringify(path)}: want ${want}, got ${got}`);
    this.path = path;
    this.want = want;
    this.got = got;
  }
}

/**
 * Bounds on a check: values nest no deeper (as in Go), and the steps spent
 * on union variants that did not fit are capped, so a check costs at most
 * a walk of the value plus this much backtracking.
 */
const maxDepth = 128;
const maxWasted = 1 << 18;

/** A misfit, made a DecodeError only when it is the answer: unions discard many. */
interface Misfit {
  readonly path: string;
  readonly want: string;
  readonly got: string;
}

/**
 * Returns r.structured as T once it fits shape, whose names are in shapes;
 * otherwise throws a DecodeError naming the first place that does not
 * fit. A result with no structured content is a DecodeError at "".
 */
export function decodeStructured<T>(r: Result, shape: Shape, shapes: Shapes): T {
  if (r.structured === undefined) {
    throw new DecodeError("", describe(shape), "no structured content");
  }
  const m = new Checker(shapes).check(r.structured, shape, "", 0);
  if (m !== undefined) {
    throw new DecodeError(m.path, m.want, m.got);
  }
  return r.structured as T;
}

/** The name of a shape for messages: a type's name, or its kind. */
function describe(s: Shape): string {
  if (typeof s === "string") {
    return s;
  }
  switch (s[0]) {
    case "list":
      return "list of " + describe(s[1]);
    case "map":
      return "map of " + describe(s[1]);
    case "nullable":
      return describe(s[1]) + " or null";
    default:
      return s[0];
  }
}

/** What a value is, for messages. */
function kindOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (ArrayBuffer.isView(v)) return "binary";
  if (typeof v === "number" && !Number.isInteger(v)) return "number " + String(v);
  if (typeof v === "number" || typeof v === "bigint") return "integer " + String(v);
  if (typeof v === "string") return "string";
  return typeof v;
}

function isObject(v: unknown): v is { readonly [key: string]: unknown } {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !ArrayBuffer.isView(v);
}

/** RFC 6901: "~" is "~0", "/" is "~1". */
function pointer(path: string, key: string | number): string {
  return path + "/" + String(key).replaceAll("~", "~0").replaceAll("/", "~1");
}

class Checker {
  private steps = 0;
  private wasted = 0;
  constructor(private readonly shapes: Shapes) {}

  /** Returns the first misfit of v to s, or undefined when v fits. */
  check(v: unknown, s: Shape, path: string, depth: number): Misfit | undefined {
    this.steps++;
    if (depth > maxDepth) {
      return { path, want: describe(s), got: "a value nested too deep" };
    }
    const miss = (): Misfit => ({ path, want: describe(s), got: kindOf(v) });
    if (typeof s === "string") {
      switch (s) {
        case "any":
          return undefined;
        case "string":
          return typeof v === "string" ? undefined : miss();
        case "boolean":
          return typeof v === "boolean" ? undefined : miss();
        case "number":
          return typeof v === "number" || typeof v === "bigint" ? undefined : miss();
        case "integer":
          return (typeof v === "number" && Number.isInteger(v)) || typeof v === "bigint" ? undefined : miss();
      }
      if (!Object.hasOwn(this.shapes, s)) {
        throw new TypeError(`capwire: the façade's shapes name no type ${JSON.stringify(s)}`);
      }
      const named = this.shapes[s]!;
      const m = this.check(v, named, path, depth + 1);
      // A named type's own misfit is reported under its name.
      return m !== undefined && m.path === path && m.want === describe(named) ? { ...m, want: s } : m;
    }
    switch (s[0]) {
      case "nullable":
        return v === null ? undefined : this.check(v, s[1], path, depth + 1);
      case "list":
        if (!Array.isArray(v)) return miss();
        for (let i = 0; i < v.length; i++) {
          const m = this.check(v[i], s[1], pointer(path, i), depth + 1);
          if (m !== undefined) return m;
        }
        return undefined;
      case "map":
        if (!isObject(v)) return miss();
        for (const [k, x] of Object.entries(v)) {
          const m = this.check(x, s[1], pointer(path, k), depth + 1);
          if (m !== undefined) return m;
        }
        return undefined;
      case "record": {
        if (!isObject(v)) return miss();
        for (const [k, fs] of s[1]) {
          if (!Object.hasOwn(v, k)) {
            return { path: pointer(path, k), want: describe(fs), got: "nothing (a required key is missing)" };
          }
          const m = this.check(v[k], fs, pointer(path, k), depth + 1);
          if (m !== undefined) return m;
        }
        for (const [k, fs] of s[2]) {
          if (Object.hasOwn(v, k)) {
            const m = this.check(v[k], fs, pointer(path, k), depth + 1);
            if (m !== undefined) return m;
          }
        }
        return undefined;
      }
      case "enum":
        return (typeof v === "string" || typeof v === "number") && s[1].includes(v) ? undefined : miss();
      case "union":
        for (const variant of s[1]) {
          if (this.wasted > maxWasted) break;
          const before = this.steps;
          if (this.check(v, variant, path, depth + 1) === undefined) return undefined;
          this.wasted += this.steps - before;
        }
        return this.wasted > maxWasted ? { path, want: describe(s), got: "a value too costly to check" } : miss();
    }
    throw new TypeError(`capwire: a façade's shape has no kind ${JSON.stringify(String((s as readonly unknown[])[0]))}`);
  }
}

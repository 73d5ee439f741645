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
export type Shape = string | readonly ["list" | "map" | "nullable", Shape] | readonly ["record", readonly Field[], readonly Field[]] | readonly ["enum", readonly (string | number)[]] | readonly ["union", readonly Shape[]];
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
export declare class DecodeError extends CapwireError {
    name: string;
    readonly path: string;
    readonly want: string;
    readonly got: string;
    constructor(path: string, want: string, got: string);
}
/**
 * Returns r.structured as T once it fits shape, whose names are in shapes;
 * otherwise throws a DecodeError naming the first place that does not
 * fit. A result with no structured content is a DecodeError at "".
 */
export declare function decodeStructured<T>(r: Result, shape: Shape, shapes: Shapes): T;

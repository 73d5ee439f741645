/** The deepest nesting any capbridge decoder accepts (docs/capwire.md, "Envelopes"). */
export declare const maxDepth = 128;
/** MessagePack families; signed formats holding a non-negative value are Uint. */
export declare const Kind: {
    readonly Nil: 1;
    readonly False: 2;
    readonly True: 3;
    readonly Uint: 4;
    readonly NegInt: 5;
    readonly Float32: 6;
    readonly Float64: 7;
    readonly Str: 8;
    readonly Bin: 9;
    readonly Ext: 10;
    readonly Array: 11;
    readonly Map: 12;
};
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
export declare class Malformed extends Error {
    readonly short: boolean;
    constructor(short: boolean);
}
/** The end of a value, and whether it nests deeper than maxDepth. */
export interface Span {
    end: number;
    deep: boolean;
}
/** Decodes the header at b[i]; never reads past b's end. */
export declare function readHead(b: Uint8Array, i: number): Head;
/** The offset just past a value whose header is h (not Array or Map). */
export declare function endOf(h: Head): number;
/**
 * Returns the end of the value at b[i], checking that it is well formed;
 * depth is the number of containers already open around it. A container
 * opened at depth maxDepth is walked flat to its end and reported deep, so
 * a caller can report the limit and still read on. Every count is checked
 * against the bytes left before it is looped over, so the work is bounded
 * by b's length and the recursion by maxDepth.
 */
export declare function skip(b: Uint8Array, i: number, depth: number): Span;
/**
 * Checks that raw is exactly one well-formed value no deeper than
 * maxDepth; returns a description of the fault, or "" when it is sound.
 */
export declare function check(raw: Uint8Array): string;
/** A growable byte buffer for the shortest-form writers below. */
export declare class Writer {
    private buf;
    length: number;
    private room;
    byte(...bs: number[]): void;
    bytes(p: Uint8Array): void;
    /** Writes n as a big-endian u32 at offset at (a length prefix reserved earlier). */
    u32At(at: number, n: number): void;
    str(s: string): void;
    /** Writes a non-negative safe integer in its shortest unsigned form. */
    uint(v: number): void;
    mapHeader(n: number): void;
    result(): Uint8Array;
}
/** Decodes UTF-8, or returns undefined for invalid bytes. */
export declare function decodeUTF8(p: Uint8Array): string | undefined;
/** Reports whether s holds a lone surrogate, which has no UTF-8 form. */
export declare function hasLoneSurrogate(s: string): boolean;

import { Result } from "./result.js";
/** The wire version this package speaks. */
export declare const version = 1;
/** Starts every capability name in v1: a call's cap is "mcp.<server>". */
export declare const capPrefix = "mcp.";
/** The capability of capbridge itself: describe, search and read_resource within the grant. */
export declare const capBridge = "capbridge";
/** The default (and largest sensible) frame payload: 16 MiB. */
export declare const defaultMaxFrame: number;
/** A decoded envelope from capbridge. */
export type Message = {
    t: "welcome";
    v: number;
    servers: string[];
} | {
    t: "result";
    id: number;
    result: Result;
} | {
    t: "denied";
    id: number | undefined;
    code: string;
    message: string;
    path: string;
    rpcCode: number | undefined;
    quota: string;
    retryMs: number | undefined;
} | {
    t: "fatal";
    code: string;
    message: string;
} | {
    t: "hello" | "call" | "cancel";
};
/** Reports whether t is a v1 envelope type. */
export declare function knownType(t: string): boolean;
export declare function encodeHello(token: string, maxFrame: number): Uint8Array;
export declare function encodeCancel(id: number, maxFrame: number): Uint8Array;
/**
 * Encodes a call frame. args is encoded by @msgpack/msgpack (see
 * encodeArgs) straight after the head; timeoutMS 0 means none given,
 * traceparent "" none.
 */
export declare function encodeCall(id: number, cap: string, op: string, args: Uint8Array, timeoutMS: number, maxFrame: number, traceparent?: string): Uint8Array;
/**
 * Encodes a call's arguments as one MessagePack map. null and undefined
 * mean {}; a Uint8Array already holding MessagePack is not special (it is
 * binary data). Values are what JSON can say plus binary data (Uint8Array)
 * and bigint; a Map, Set, Date, class instance, function or symbol is a
 * TypeError naming where it is, since @msgpack/msgpack would silently send
 * some of them as something else. Undefined object properties are left out,
 * as JSON.stringify does.
 */
export declare function encodeArgs(args: unknown): Uint8Array;
/**
 * Decodes one frame's payload. Faults: a payload that is not exactly one
 * well-formed map is a fatal bad_frame; anything else wrong (missing or
 * unknown "t", wrong field types, nesting over 128, invalid UTF-8, a
 * duplicated key) is a non-fatal bad_request carrying the frame's id when
 * it had a usable one.
 */
export declare function decode(b: Uint8Array): Message;

/** Base class of every error this package throws. */
export declare class CapwireError extends Error {
    name: string;
}
/**
 * A call that capbridge refused or could not complete: the content of a
 * `denied` frame, the error a Client's call rejects with. A tool that ran
 * and failed is a Result with isError, not a DeniedError.
 */
export declare class DeniedError extends CapwireError {
    name: string;
    /** A denial code (Denial.*); an unknown code from a newer peer is carried as is. */
    readonly code: string;
    /** An RFC 6901 pointer into args (bad_arguments) or into the result (result_malformed), or "". */
    readonly path: string;
    /** The MCP server's JSON-RPC error code, for server_error; undefined when absent. */
    readonly rpcCode: number | undefined;
    /** capbridge's words, for people; never parse them. */
    readonly detail: string;
    /** For quota_exceeded: the quota hit, as "[scope:]kind" ("rate", "github:calls"); "" otherwise. */
    readonly quota: string;
    /** For quota_exceeded of a rate: milliseconds until the next call is allowed; undefined for a total. */
    readonly retryMs: number | undefined;
    constructor(code: string, detail?: string, path?: string, rpcCode?: number, quota?: string, retryMs?: number);
}
/**
 * The `fatal` frame capbridge ended the connection with (bad_token,
 * unsupported_version, ...). Dial rejects with it; a connection that ends
 * this way fails its calls with a ClosedError whose cause is it.
 */
export declare class FatalError extends CapwireError {
    name: string;
    readonly code: string;
    readonly detail: string;
    constructor(code: string, detail?: string);
}
/**
 * A fault in the bytes capbridge sent: a broken frame (bad_frame,
 * frame_too_large; fatal) or a well-framed envelope that is malformed
 * (bad_request). path points into the envelope, offset is the byte in the
 * payload where the fault was found (-1 if unknown), id is the call the
 * envelope named when it had a usable one.
 */
export declare class WireError extends CapwireError {
    name: string;
    readonly code: string;
    readonly fatal: boolean;
    readonly path: string;
    readonly offset: number;
    readonly type: string;
    readonly id: number | undefined;
    constructor(f: {
        code: string;
        fatal: boolean;
        msg: string;
        path?: string;
        offset?: number;
        type?: string;
        id?: number | undefined;
    });
}
/**
 * The connection is gone: closed by close(), hung up by capbridge, ended
 * by a fatal frame or a broken frame, or a write that failed or stalled.
 * Every call waiting on the connection, and every later one, rejects with
 * it; `cause` says why (a FatalError, a WireError, a socket error). Dial
 * again to go on.
 */
export declare class ClosedError extends CapwireError {
    name: string;
    constructor(why: string, cause?: unknown);
}
/** CAPBRIDGE_SOCKET or CAPBRIDGE_TOKEN is not set: not running under capbridge. */
export declare class NoEnvError extends CapwireError {
    name: string;
    constructor();
}
/**
 * Reports whether err, or an error in its `cause` chain, carries code: a
 * DeniedError, FatalError or WireError with that code. It is Go's
 * errors.Is(err, capwire.ErrXxx).
 */
export declare function hasCode(err: unknown, code: string): boolean;
/** Type guard: err is a DeniedError (with code, when given). */
export declare function isDenied(err: unknown, code?: string): err is DeniedError;
/** Type guard: err is a ClosedError (the connection is gone). */
export declare function isClosed(err: unknown): err is ClosedError;

import type { Result } from "./result.js";
/** Environment variables a jailed program finds capbridge by. */
export declare const envSocket = "CAPBRIDGE_SOCKET";
export declare const envToken = "CAPBRIDGE_TOKEN";
/** Bounds of a Client; every field is optional and defaults as shown. */
export interface DialOptions {
    /** Largest frame payload read or written; 16 MiB. A larger frame from capbridge ends the connection. */
    maxFrame?: number;
    /** Calls in flight at once; 1024. A call beyond it waits for a slot (bounded by its signal), not refused. */
    maxInFlight?: number;
    /** Bounds the connect and hello/welcome exchange, in ms; 10 000. */
    handshakeTimeoutMs?: number;
    /**
     * How long a write may wait for capbridge to read, in ms; 30 000. A
     * capbridge that does not read for that long is taken for dead and the
     * connection ends.
     */
    writeTimeoutMs?: number;
    /** Aborts the dial. */
    signal?: AbortSignal;
}
/** Per-call options. */
export interface CallOptions {
    /** Aborting sends cancel for the call; the call rejects with signal.reason. */
    signal?: AbortSignal;
    /**
     * The call's deadline in ms, sent to capbridge as timeout_ms. When it
     * passes first here, the call sends cancel and rejects with a
     * DOMException named "TimeoutError" (as AbortSignal.timeout does); when
     * capbridge's timer wins, with a DeniedError coded timeout.
     */
    timeoutMs?: number;
    /**
     * The W3C trace context of the program's span making the call
     * ("00-<trace id>-<span id>-<flags>"), sent as the call's traceparent:
     * capbridge's span becomes its child, and the MCP server's request
     * carries capbridge's span as _meta.traceparent.
     */
    traceparent?: string;
}
/**
 * A connection to capbridge's call socket. Calls run concurrently and are
 * answered in any order; each settles exactly once. When the connection
 * breaks (capbridge hung up or sent a fatal frame, a frame was broken, a
 * write failed or stalled) every waiting call, and every later one,
 * rejects with one ClosedError. An idle client does not keep the process
 * alive: the socket holds the event loop only while calls are waiting.
 */
export declare class Client {
    /** The MCP servers the grant reaches, as the welcome named them. */
    readonly servers: readonly string[];
    private readonly sock;
    private readonly maxFrame;
    private readonly maxInFlight;
    private readonly writeTimeoutMs;
    private readonly pending;
    private readonly waiters;
    private inFlight;
    private nextId;
    private failure;
    private stall;
    private constructor();
    /**
     * Connects to socketPath and performs the hello/welcome exchange with
     * token. A refusal by capbridge rejects with the FatalError it sent
     * (hasCode(err, Fatal.BadToken), ...).
     */
    static dial(socketPath: string, token: string, options?: DialOptions): Promise<Client>;
    /** Dials CAPBRIDGE_SOCKET with CAPBRIDGE_TOKEN; NoEnvError when either is unset. */
    static fromEnv(options?: DialOptions): Promise<Client>;
    /** Whether the connection is gone (closed, or broken). */
    get closed(): boolean;
    /**
     * Invokes tool on MCP server (the capability "mcp."+server). args must
     * be an object (null or undefined mean {}); see encodeArgs for what it
     * may hold. Resolves with the Result when the tool ran (isError set if
     * it failed); rejects with a DeniedError when capbridge refused the call,
     * with signal.reason when opts.signal aborted it, with a ClosedError when
     * the connection is gone.
     */
    call(server: string, tool: string, args?: unknown, opts?: CallOptions): Promise<Result>;
    /**
     * The whole declarations, in TypeScript, of the named tools of server
     * (by function or wire name; none: every tool the grant allows).
     */
    describe(server: string, tools?: string[], opts?: CallOptions): Promise<string>;
    /** The tools the grant allows that match query's words, best first, at most limit (0: ten). */
    search(query: string, limit?: number, opts?: CallOptions): Promise<Match[]>;
    /**
     * Reads the resource at uri from server, whose resources the grant must
     * allow: each entry is a block of kind "resource" (uri, mime, text or data).
     */
    readResource(server: string, uri: string, opts?: CallOptions): Promise<Result>;
    /**
     * Runs a call of tool (its wire name) on server in the background, within
     * the grant, and resolves with its handle at once; collect waits for its
     * result later. A grant holds at most 16 started calls not yet collected.
     */
    start(server: string, tool: string, args?: unknown, opts?: CallOptions): Promise<string>;
    /**
     * Waits for the result of the call started as handle, as call resolves
     * with a call's result or rejects with its refusal; a timeout or abort
     * leaves the call running, to collect again.
     */
    collect(handle: string, opts?: CallOptions): Promise<Result>;
    /** Cancels the call started as handle and forgets it. */
    drop(handle: string, opts?: CallOptions): Promise<void>;
    private invoke;
    /** Closes the connection: calls still waiting reject with a ClosedError. Idempotent. */
    close(): void;
    private acquire;
    private release;
    private updateRef;
    private write;
    private clearStall;
    private onData;
    private dispatch;
    private deliver;
    private fail;
}
/** One tool search found. */
export interface Match {
    server: string;
    /** The façade function. */
    func: string;
    /** The wire name. */
    tool: string;
    signature: string;
    /** Higher is better. */
    score: number;
}
/** Client.describe on the shared client. */
export declare function describe(server: string, tools?: string[]): Promise<string>;
/** Client.search on the shared client. */
export declare function search(query: string, limit?: number): Promise<Match[]>;
/** Client.start on the shared client. */
export declare function start(server: string, tool: string, args?: unknown): Promise<string>;
/** Client.collect on the shared client. */
export declare function collect(handle: string, opts?: CallOptions): Promise<Result>;
/** Client.drop on the shared client. */
export declare function drop(handle: string): Promise<void>;
/** Client.readResource on the shared client. */
export declare function readResource(server: string, uri: string): Promise<Result>;
/**
 * The process-wide client dialed from the environment on first use; if
 * its connection has broken (or the dial failed), the next call dials
 * again. Generated façades call this; programs need not.
 */
export declare function shared(): Promise<Client>;

// The client: one connection to capbridge's call socket, with any number
// of calls multiplexed on it by id (docs/capwire.md, "The conversation").

import * as net from "node:net";

import { ClosedError, CapwireError, DeniedError, FatalError, NoEnvError, WireError } from "./errors.js";
import { capBridge, capPrefix, decode, defaultMaxFrame, encodeArgs, encodeCall, encodeCancel, encodeHello, knownType, version } from "./envelope.js";
import { FrameReader } from "./frame.js";
import type { Result } from "./result.js";

/** Environment variables a jailed program finds capbridge by. */
export const envSocket = "CAPBRIDGE_SOCKET";
export const envToken = "CAPBRIDGE_TOKEN";

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

interface Pending {
  resolve(r: Result): void;
  reject(e: unknown): void;
}

/**
 * A connection to capbridge's call socket. Calls run concurrently and are
 * answered in any order; each settles exactly once. When the connection
 * breaks (capbridge hung up or sent a fatal frame, a frame was broken, a
 * write failed or stalled) every waiting call, and every later one,
 * rejects with one ClosedError. An idle client does not keep the process
 * alive: the socket holds the event loop only while calls are waiting.
 */
export class Client {
  /** The MCP servers the grant reaches, as the welcome named them. */
  readonly servers: readonly string[];

  private readonly sock: net.Socket;
  private readonly maxFrame: number;
  private readonly maxInFlight: number;
  private readonly writeTimeoutMs: number;
  private readonly pending = new Map<number, Pending>();
  private readonly waiters: Array<{ go(): void; stop(e: unknown): void }> = [];
  private inFlight = 0;
  private nextId = 1;
  private failure: ClosedError | undefined;
  private stall: NodeJS.Timeout | undefined;

  private constructor(sock: net.Socket, reader: FrameReader, servers: string[], o: DialOptions) {
    this.sock = sock;
    this.servers = Object.freeze([...servers]);
    this.maxFrame = reader.maxFrame;
    this.maxInFlight = positive(o.maxInFlight, 1024);
    this.writeTimeoutMs = positive(o.writeTimeoutMs, 30_000);
    sock.on("data", (chunk: Buffer) => this.onData(reader, chunk));
    sock.on("end", () => this.fail(new ClosedError("capbridge hung up", reader.endFault())));
    sock.on("close", () => this.fail(new ClosedError("socket closed")));
    sock.on("error", (err) => this.fail(new ClosedError("socket: " + err.message, err)));
    sock.on("drain", () => this.clearStall());
    sock.unref();
  }

  /**
   * Connects to socketPath and performs the hello/welcome exchange with
   * token. A refusal by capbridge rejects with the FatalError it sent
   * (hasCode(err, Fatal.BadToken), ...).
   */
  static async dial(socketPath: string, token: string, options: DialOptions = {}): Promise<Client> {
    const maxFrame = Math.min(positive(options.maxFrame, defaultMaxFrame), 0xffffffff);
    const timeoutMs = positive(options.handshakeTimeoutMs, 10_000);
    const signal = options.signal;
    signal?.throwIfAborted();
    const hello = encodeHello(token, maxFrame);
    const reader = new FrameReader(maxFrame);
    const sock = net.createConnection({ path: socketPath });
    return new Promise<Client>((resolve, reject) => {
      let done = false;
      const finish = (err: unknown, c?: Client) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        sock.removeListener("data", onData);
        sock.removeListener("error", onError);
        sock.removeListener("end", onEnd);
        if (c !== undefined) {
          resolve(c);
          return;
        }
        sock.destroy();
        reject(err);
      };
      const onAbort = () => finish(signal!.reason);
      const onError = (err: Error) => finish(new CapwireError(`capwire: dial ${socketPath}: ${err.message}`, { cause: err }));
      const onEnd = () => finish(reader.endFault() ?? new ClosedError(`capbridge hung up during the handshake`));
      const onData = (chunk: Buffer) => {
        let frames: Uint8Array[];
        try {
          frames = reader.push(chunk);
        } catch (err) {
          finish(err);
          return;
        }
        if (frames.length === 0) return;
        try {
          const m = decode(frames[0]!);
          switch (m.t) {
            case "welcome":
              if (m.v !== version) {
                finish(new CapwireError(`capwire: capbridge answered with wire version ${m.v}, want ${version}`));
                return;
              }
              // Frames after the welcome cannot have come: capbridge
              // sends nothing before a call.
              finish(undefined, new Client(sock, reader, m.servers, options));
              return;
            case "fatal":
              finish(new FatalError(m.code, m.message));
              return;
          }
          finish(new CapwireError(`capwire: capbridge answered hello with "${m.t}"`));
        } catch (err) {
          finish(err);
        }
      };
      const timer = setTimeout(() => finish(new CapwireError(`capwire: dial ${socketPath}: no welcome within ${timeoutMs} ms`)), timeoutMs);
      signal?.addEventListener("abort", onAbort, { once: true });
      sock.on("error", onError);
      sock.on("end", onEnd);
      sock.on("data", onData);
      sock.write(hello);
    });
  }

  /** Dials CAPBRIDGE_SOCKET with CAPBRIDGE_TOKEN; NoEnvError when either is unset. */
  static fromEnv(options: DialOptions = {}): Promise<Client> {
    const sock = process.env[envSocket];
    const tok = process.env[envToken];
    if (!sock || !tok) return Promise.reject(new NoEnvError());
    return Client.dial(sock, tok, options);
  }

  /** Whether the connection is gone (closed, or broken). */
  get closed(): boolean {
    return this.failure !== undefined;
  }

  /**
   * Invokes tool on MCP server (the capability "mcp."+server). args must
   * be an object (null or undefined mean {}); see encodeArgs for what it
   * may hold. Resolves with the Result when the tool ran (isError set if
   * it failed); rejects with a DeniedError when capbridge refused the call,
   * with signal.reason when opts.signal aborted it, with a ClosedError when
   * the connection is gone.
   */
  async call(server: string, tool: string, args?: unknown, opts: CallOptions = {}): Promise<Result> {
    return this.invoke(capPrefix + server, tool, args, opts);
  }

  /**
   * The whole declarations, in TypeScript, of the named tools of server
   * (by function or wire name; none: every tool the grant allows).
   */
  async describe(server: string, tools: string[] = [], opts: CallOptions = {}): Promise<string> {
    return (await this.invoke(capBridge, "describe", { server, tools, lang: "ts" }, opts)).text();
  }

  /** The tools the grant allows that match query's words, best first, at most limit (0: ten). */
  async search(query: string, limit = 0, opts: CallOptions = {}): Promise<Match[]> {
    const r = await this.invoke(capBridge, "search", { query, limit, lang: "ts" }, opts);
    return (r.structured as { matches: Match[] }).matches;
  }

  /**
   * Reads the resource at uri from server, whose resources the grant must
   * allow: each entry is a block of kind "resource" (uri, mime, text or data).
   */
  async readResource(server: string, uri: string, opts: CallOptions = {}): Promise<Result> {
    return this.invoke(capBridge, "read_resource", { server, uri }, opts);
  }

  /**
   * Runs a call of tool (its wire name) on server in the background, within
   * the grant, and resolves with its handle at once; collect waits for its
   * result later. A grant holds at most 16 started calls not yet collected.
   */
  async start(server: string, tool: string, args?: unknown, opts: CallOptions = {}): Promise<string> {
    return (await this.invoke(capBridge, "start", { server, tool, args: args ?? {} }, opts)).text();
  }

  /**
   * Waits for the result of the call started as handle, as call resolves
   * with a call's result or rejects with its refusal; a timeout or abort
   * leaves the call running, to collect again.
   */
  async collect(handle: string, opts: CallOptions = {}): Promise<Result> {
    return this.invoke(capBridge, "collect", { handle }, opts);
  }

  /** Cancels the call started as handle and forgets it. */
  async drop(handle: string, opts: CallOptions = {}): Promise<void> {
    await this.invoke(capBridge, "drop", { handle }, opts);
  }

  private async invoke(cap: string, op: string, args: unknown, opts: CallOptions): Promise<Result> {
    const what = (cap.startsWith(capPrefix) ? cap.slice(capPrefix.length) : cap) + "/" + op;
    const { signal } = opts;
    signal?.throwIfAborted();
    if (this.failure) throw this.failure;
    let timeoutMS = 0;
    if (opts.timeoutMs !== undefined) {
      if (!(opts.timeoutMs > 0) || !Number.isFinite(opts.timeoutMs)) throw new RangeError("capwire: timeoutMs must be a positive number");
      timeoutMS = Math.max(1, Math.ceil(opts.timeoutMs));
    }
    // Encode before waiting for a slot: a bad argument fails at once.
    const argBytes = encodeArgs(args);
    await this.acquire(signal);
    try {
      const id = this.nextId++;
      const frame = encodeCall(id, cap, op, argBytes, timeoutMS, this.maxFrame, opts.traceparent ?? "");
      return await new Promise<Result>((resolve, reject) => {
        let timer: NodeJS.Timeout | undefined;
        const abandon = (reason: unknown) => {
          // The reply may have won the race; then it is the outcome.
          if (!this.pending.has(id)) return;
          this.pending.delete(id);
          this.write(encodeCancel(id, this.maxFrame));
          settle();
          reject(reason);
        };
        const onAbort = () => abandon(signal!.reason);
        const settle = () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", onAbort);
          this.updateRef();
        };
        this.pending.set(id, {
          resolve: (r) => {
            settle();
            resolve(r);
          },
          reject: (e) => {
            settle();
            reject(e);
          },
        });
        this.updateRef();
        signal?.addEventListener("abort", onAbort, { once: true });
        if (timeoutMS !== 0) {
          timer = setTimeout(
            () => abandon(new DOMException(`capwire: call ${what} timed out after ${timeoutMS} ms`, "TimeoutError")),
            timeoutMS,
          );
        }
        this.write(frame);
      });
    } finally {
      this.release();
    }
  }

  /** Closes the connection: calls still waiting reject with a ClosedError. Idempotent. */
  close(): void {
    this.fail(new ClosedError(""));
  }

  private acquire(signal: AbortSignal | undefined): Promise<void> {
    if (this.inFlight < this.maxInFlight) {
      this.inFlight++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const w = {
        go: () => {
          signal?.removeEventListener("abort", onAbort);
          this.inFlight++;
          resolve();
        },
        stop: (e: unknown) => {
          signal?.removeEventListener("abort", onAbort);
          reject(e);
        },
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(w);
        if (i >= 0) this.waiters.splice(i, 1);
        this.updateRef();
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(w);
      this.updateRef();
    });
  }

  private release(): void {
    this.inFlight--;
    const w = this.waiters.shift();
    if (w !== undefined && this.failure === undefined) w.go();
    this.updateRef();
  }

  // The socket holds the event loop only while someone waits on it.
  private updateRef(): void {
    if (this.failure !== undefined) return;
    if (this.pending.size > 0 || this.waiters.length > 0) this.sock.ref();
    else this.sock.unref();
  }

  private write(frame: Uint8Array): void {
    if (this.failure !== undefined) return;
    const flushed = this.sock.write(frame);
    if (!flushed && this.stall === undefined) {
      this.stall = setTimeout(() => {
        this.fail(new ClosedError(`writing: capbridge has not read for ${this.writeTimeoutMs} ms`));
      }, this.writeTimeoutMs);
    }
  }

  private clearStall(): void {
    clearTimeout(this.stall);
    this.stall = undefined;
  }

  private onData(reader: FrameReader, chunk: Buffer): void {
    let frames: Uint8Array[];
    try {
      frames = reader.push(chunk);
    } catch (err) {
      this.fail(new ClosedError("reading: " + (err as Error).message, err));
      return;
    }
    for (const f of frames) {
      if (this.failure !== undefined) return;
      this.dispatch(f);
    }
  }

  private dispatch(frame: Uint8Array): void {
    let m;
    try {
      m = decode(frame);
    } catch (err) {
      if (!(err instanceof WireError)) throw err;
      if (!err.fatal && err.type !== "" && !knownType(err.type)) return; // from a newer capbridge (docs/capwire.md, "Versioning")
      if (!err.fatal && err.id !== undefined) {
        this.deliver(err.id, undefined, new CapwireError("capwire: malformed reply: " + err.message, { cause: err }));
        return;
      }
      this.fail(new ClosedError(err.message, err));
      return;
    }
    switch (m.t) {
      case "result":
        this.deliver(m.id, m.result, undefined);
        return;
      case "denied":
        if (m.id === undefined) {
          // capbridge could not tell which call it refused, so one of ours
          // will never be answered; only ending the connection settles it.
          this.fail(new ClosedError("capbridge refused a frame", new DeniedError(m.code, m.message, m.path, m.rpcCode, m.quota, m.retryMs)));
          return;
        }
        this.deliver(m.id, undefined, new DeniedError(m.code, m.message, m.path, m.rpcCode, m.quota, m.retryMs));
        return;
      case "fatal": {
        const f = new FatalError(m.code, m.message);
        this.fail(new ClosedError(f.message, f));
        return;
      }
    }
    this.fail(new ClosedError(`capbridge sent a "${m.t}" frame`));
  }

  // A reply to a call that was abandoned or never made is dropped.
  private deliver(id: number, r: Result | undefined, err: unknown): void {
    const p = this.pending.get(id);
    if (p === undefined) return;
    this.pending.delete(id);
    if (r !== undefined) p.resolve(r);
    else p.reject(err);
  }

  // Stops the client: only the first failure counts.
  private fail(err: ClosedError): void {
    if (this.failure !== undefined) return;
    this.failure = err;
    this.clearStall();
    const pending = [...this.pending.values()];
    this.pending.clear();
    const waiters = this.waiters.splice(0);
    for (const p of pending) p.reject(err);
    for (const w of waiters) w.stop(err);
    this.sock.destroy();
  }
}

function positive(v: number | undefined, dflt: number): number {
  return v !== undefined && v > 0 ? v : dflt;
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
export async function describe(server: string, tools: string[] = []): Promise<string> {
  return (await shared()).describe(server, tools);
}

/** Client.search on the shared client. */
export async function search(query: string, limit = 0): Promise<Match[]> {
  return (await shared()).search(query, limit);
}

/** Client.start on the shared client. */
export async function start(server: string, tool: string, args?: unknown): Promise<string> {
  return (await shared()).start(server, tool, args);
}

/** Client.collect on the shared client. */
export async function collect(handle: string, opts: CallOptions = {}): Promise<Result> {
  return (await shared()).collect(handle, opts);
}

/** Client.drop on the shared client. */
export async function drop(handle: string): Promise<void> {
  return (await shared()).drop(handle);
}

/** Client.readResource on the shared client. */
export async function readResource(server: string, uri: string): Promise<Result> {
  return (await shared()).readResource(server, uri);
}

let sharedClient: Promise<Client> | undefined;

/**
 * The process-wide client dialed from the environment on first use; if
 * its connection has broken (or the dial failed), the next call dials
 * again. Generated façades call this; programs need not.
 */
export async function shared(): Promise<Client> {
  const cur = sharedClient;
  if (cur !== undefined) {
    const c = await cur.catch(() => undefined);
    if (c !== undefined && !c.closed) return c;
    if (sharedClient === cur) sharedClient = undefined;
  }
  sharedClient ??= Client.fromEnv();
  return sharedClient;
}

// Errors a Client reports. Each class carries what the spec's frame or
// fault carries, under the spec's names; hasCode is what Go's
// errors.Is(err, capwire.ErrTimeout) is: it matches any of them by code,
// however wrapped (through `cause`).

/** Base class of every error this package throws. */
export class CapwireError extends Error {
  override name = "CapwireError";
}

/**
 * A call that capbridge refused or could not complete: the content of a
 * `denied` frame, the error a Client's call rejects with. A tool that ran
 * and failed is a Result with isError, not a DeniedError.
 */
export class DeniedError extends CapwireError {
  override name = "DeniedError";
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

  constructor(code: string, detail = "", path = "", rpcCode?: number, quota = "", retryMs?: number) {
    let s = "capwire: denied: " + code;
    if (path !== "") s += " at " + path;
    if (rpcCode !== undefined) s += " (rpc code " + rpcCode + ")";
    if (quota !== "") s += " (quota " + quota + (retryMs !== undefined ? ", retry in " + retryMs + " ms" : "") + ")";
    if (detail !== "") s += ": " + detail;
    super(s);
    this.code = code;
    this.detail = detail;
    this.path = path;
    this.rpcCode = rpcCode;
    this.quota = quota;
    this.retryMs = retryMs;
  }
}

/**
 * The `fatal` frame capbridge ended the connection with (bad_token,
 * unsupported_version, ...). Dial rejects with it; a connection that ends
 * this way fails its calls with a ClosedError whose cause is it.
 */
export class FatalError extends CapwireError {
  override name = "FatalError";
  readonly code: string;
  readonly detail: string;

  constructor(code: string, detail = "") {
    super("capwire: fatal: " + code + (detail === "" ? "" : ": " + detail));
    this.code = code;
    this.detail = detail;
  }
}

/**
 * A fault in the bytes capbridge sent: a broken frame (bad_frame,
 * frame_too_large; fatal) or a well-framed envelope that is malformed
 * (bad_request). path points into the envelope, offset is the byte in the
 * payload where the fault was found (-1 if unknown), id is the call the
 * envelope named when it had a usable one.
 */
export class WireError extends CapwireError {
  override name = "WireError";
  readonly code: string;
  readonly fatal: boolean;
  readonly path: string;
  readonly offset: number;
  readonly type: string;
  readonly id: number | undefined;

  constructor(f: { code: string; fatal: boolean; msg: string; path?: string; offset?: number; type?: string; id?: number | undefined }) {
    const path = f.path ?? "";
    const offset = f.offset ?? -1;
    let s = "capwire: " + f.code;
    if (path !== "") s += " at " + path;
    if (offset >= 0) s += " (offset " + offset + ")";
    if (f.id !== undefined) s += " in call " + f.id;
    super(s + ": " + f.msg);
    this.code = f.code;
    this.fatal = f.fatal;
    this.path = path;
    this.offset = offset;
    this.type = f.type ?? "";
    this.id = f.id;
  }
}

/**
 * The connection is gone: closed by close(), hung up by capbridge, ended
 * by a fatal frame or a broken frame, or a write that failed or stalled.
 * Every call waiting on the connection, and every later one, rejects with
 * it; `cause` says why (a FatalError, a WireError, a socket error). Dial
 * again to go on.
 */
export class ClosedError extends CapwireError {
  override name = "ClosedError";
  constructor(why: string, cause?: unknown) {
    super("capwire: connection closed" + (why === "" ? "" : ": " + why), cause === undefined ? undefined : { cause });
  }
}

/** CAPBRIDGE_SOCKET or CAPBRIDGE_TOKEN is not set: not running under capbridge. */
export class NoEnvError extends CapwireError {
  override name = "NoEnvError";
  constructor() {
    super("capwire: CAPBRIDGE_SOCKET and CAPBRIDGE_TOKEN must both be set");
  }
}

/**
 * Reports whether err, or an error in its `cause` chain, carries code: a
 * DeniedError, FatalError or WireError with that code. It is Go's
 * errors.Is(err, capwire.ErrXxx).
 */
export function hasCode(err: unknown, code: string): boolean {
  for (let e = err, n = 0; e instanceof Error && n < 32; e = e.cause, n++) {
    if ((e instanceof DeniedError || e instanceof FatalError || e instanceof WireError) && e.code === code) {
      return true;
    }
  }
  return false;
}

/** Type guard: err is a DeniedError (with code, when given). */
export function isDenied(err: unknown, code?: string): err is DeniedError {
  return err instanceof DeniedError && (code === undefined || err.code === code);
}

/** Type guard: err is a ClosedError (the connection is gone). */
export function isClosed(err: unknown): err is ClosedError {
  return err instanceof ClosedError;
}

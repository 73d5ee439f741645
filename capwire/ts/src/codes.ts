// The closed sets of codes of wire v1 (docs/capwire.md, "Denial codes" and
// "Fatal codes"), with the spec's retry verdicts. A test checks that the
// spec's tables list exactly these.

/** Denial codes: a `denied` frame answers one call; the connection lives on. */
export const Denial = {
  BadRequest: "bad_request",
  UnknownCapability: "unknown_capability",
  NotGranted: "not_granted",
  UnknownTool: "unknown_tool",
  BadArguments: "bad_arguments",
  ServerUnavailable: "server_unavailable",
  Timeout: "timeout",
  Cancelled: "cancelled",
  ServerError: "server_error",
  ResultMalformed: "result_malformed",
  ResultTooLarge: "result_too_large",
  Overloaded: "overloaded",
  Revoked: "revoked",
  ShuttingDown: "shutting_down",
  SurfaceChanged: "surface_changed",
  InputRequired: "input_required",
  QuotaExceeded: "quota_exceeded",
} as const;

/** Fatal codes: a `fatal` frame ends the connection. */
export const Fatal = {
  BadFrame: "bad_frame",
  FrameTooLarge: "frame_too_large",
  BadHello: "bad_hello",
  BadToken: "bad_token",
  UnsupportedVersion: "unsupported_version",
} as const;

export type DenialCode = (typeof Denial)[keyof typeof Denial];
export type FatalCode = (typeof Fatal)[keyof typeof Fatal];

const denialCodes: ReadonlySet<string> = new Set(Object.values(Denial));
const fatalCodes: ReadonlySet<string> = new Set(Object.values(Fatal));
const retryableCodes: ReadonlySet<string> = new Set([Denial.ServerUnavailable, Denial.Timeout, Denial.Overloaded]);

/** Reports whether code is one of the v1 denial codes. */
export function isDenialCode(code: string): code is DenialCode {
  return denialCodes.has(code);
}

/** Reports whether code is one of the v1 fatal codes. */
export function isFatalCode(code: string): code is FatalCode {
  return fatalCodes.has(code);
}

/**
 * Reports whether repeating a call denied with code can succeed without
 * changing the call: true for server_unavailable, timeout and overloaded
 * (after a pause; a timed-out call may have taken effect), false for every
 * other code, including codes this version does not know. server_error is
 * false: whether the server's failure is transient depends on its
 * rpcCode, which only the caller can judge; quota_exceeded is false too: a
 * rate quota refills (the denial's retryMs says when), a total does not.
 */
export function retryable(code: string): boolean {
  return retryableCodes.has(code);
}

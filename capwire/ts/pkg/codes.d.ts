/** Denial codes: a `denied` frame answers one call; the connection lives on. */
export declare const Denial: {
    readonly BadRequest: "bad_request";
    readonly UnknownCapability: "unknown_capability";
    readonly NotGranted: "not_granted";
    readonly UnknownTool: "unknown_tool";
    readonly BadArguments: "bad_arguments";
    readonly ServerUnavailable: "server_unavailable";
    readonly Timeout: "timeout";
    readonly Cancelled: "cancelled";
    readonly ServerError: "server_error";
    readonly ResultMalformed: "result_malformed";
    readonly ResultTooLarge: "result_too_large";
    readonly Overloaded: "overloaded";
    readonly Revoked: "revoked";
    readonly ShuttingDown: "shutting_down";
    readonly SurfaceChanged: "surface_changed";
    readonly InputRequired: "input_required";
    readonly QuotaExceeded: "quota_exceeded";
};
/** Fatal codes: a `fatal` frame ends the connection. */
export declare const Fatal: {
    readonly BadFrame: "bad_frame";
    readonly FrameTooLarge: "frame_too_large";
    readonly BadHello: "bad_hello";
    readonly BadToken: "bad_token";
    readonly UnsupportedVersion: "unsupported_version";
};
export type DenialCode = (typeof Denial)[keyof typeof Denial];
export type FatalCode = (typeof Fatal)[keyof typeof Fatal];
/** Reports whether code is one of the v1 denial codes. */
export declare function isDenialCode(code: string): code is DenialCode;
/** Reports whether code is one of the v1 fatal codes. */
export declare function isFatalCode(code: string): code is FatalCode;
/**
 * Reports whether repeating a call denied with code can succeed without
 * changing the call: true for server_unavailable, timeout and overloaded
 * (after a pause; a timed-out call may have taken effect), false for every
 * other code, including codes this version does not know. server_error is
 * false: whether the server's failure is transient depends on its
 * rpcCode, which only the caller can judge; quota_exceeded is false too: a
 * rate quota refills (the denial's retryMs says when), a total does not.
 */
export declare function retryable(code: string): boolean;

package capwire

// Denial codes: the closed set a `denied` frame may carry in wire v1
// (docs/capwire.md, "Denial codes"). A call that is denied failed at the
// protocol level; a tool that ran and failed is a result with is_error.
const (
	CodeBadRequest        = "bad_request"
	CodeUnknownCapability = "unknown_capability"
	CodeNotGranted        = "not_granted"
	CodeUnknownTool       = "unknown_tool"
	CodeBadArguments      = "bad_arguments"
	CodeServerUnavailable = "server_unavailable"
	CodeTimeout           = "timeout"
	CodeCancelled         = "cancelled"
	CodeServerError       = "server_error"
	CodeResultMalformed   = "result_malformed"
	CodeResultTooLarge    = "result_too_large"
	CodeOverloaded        = "overloaded"
	CodeRevoked           = "revoked"
	CodeShuttingDown      = "shutting_down"
	CodeSurfaceChanged    = "surface_changed"
	CodeInputRequired     = "input_required"
	CodeQuotaExceeded     = "quota_exceeded"
)

// Fatal codes: the closed set a `fatal` frame may carry. Each ends the
// connection (docs/capwire.md, "Fatal codes").
const (
	CodeBadFrame           = "bad_frame"
	CodeFrameTooLarge      = "frame_too_large"
	CodeBadHello           = "bad_hello"
	CodeBadToken           = "bad_token"
	CodeUnsupportedVersion = "unsupported_version"
)

// codeInfo is what the spec says about one code. The table below is the
// single source for isDenialCode, IsFatalCode and Retryable, and a test
// checks that docs/capwire.md lists exactly these codes.
type codeInfo struct {
	fatal     bool
	retryable bool
}

var codes = map[string]codeInfo{
	CodeBadRequest:        {},
	CodeUnknownCapability: {},
	CodeNotGranted:        {},
	CodeUnknownTool:       {},
	CodeBadArguments:      {},
	CodeServerUnavailable: {retryable: true},
	CodeTimeout:           {retryable: true},
	CodeCancelled:         {},
	CodeServerError:       {},
	CodeResultMalformed:   {},
	CodeResultTooLarge:    {},
	CodeOverloaded:        {retryable: true},
	CodeRevoked:           {},
	CodeShuttingDown:      {},
	CodeSurfaceChanged:    {},
	CodeInputRequired:     {},
	CodeQuotaExceeded:     {},

	CodeBadFrame:           {fatal: true},
	CodeFrameTooLarge:      {fatal: true},
	CodeBadHello:           {fatal: true},
	CodeBadToken:           {fatal: true},
	CodeUnsupportedVersion: {fatal: true},
}

// isDenialCode reports whether code is one of the v1 denial codes.
func isDenialCode(code string) bool {
	info, ok := codes[code]
	return ok && !info.fatal
}

// IsFatalCode reports whether code is one of the v1 fatal codes. The
// bridge's server uses it to accept a fatal code chosen by its auth hook.
func IsFatalCode(code string) bool {
	info, ok := codes[code]
	return ok && info.fatal
}

// Retryable is for programs deciding whether to call again (the spec
// names it). It reports whether repeating a call that was denied with code can
// succeed without changing the call: true for server_unavailable, timeout
// and overloaded (after a pause; a timed-out call may have taken effect),
// false for every other code, including codes this version does not know.
// server_error is false: whether the server's failure is transient depends
// on its rpc_code, which only the caller can judge; quota_exceeded is false
// too: a rate quota refills (the denial's RetryMS says when), a total
// does not.
func Retryable(code string) bool { return codes[code].retryable }

// sentinel is the type of the per-code error values (ErrTimeout, ...). It
// is a string, not a pointer, so callers cannot mutate a sentinel.
type sentinel string

func (s sentinel) Error() string { return "capwire: " + string(s) }

// Per-code sentinels. errors.Is(err, ErrTimeout) holds for a *Denied,
// *FatalMsg or *WireError carrying that code, however wrapped.
var (
	ErrBadRequest        error = sentinel(CodeBadRequest)
	ErrUnknownCapability error = sentinel(CodeUnknownCapability)
	ErrNotGranted        error = sentinel(CodeNotGranted)
	ErrUnknownTool       error = sentinel(CodeUnknownTool)
	ErrBadArguments      error = sentinel(CodeBadArguments)
	ErrServerUnavailable error = sentinel(CodeServerUnavailable)
	ErrTimeout           error = sentinel(CodeTimeout)
	ErrCancelled         error = sentinel(CodeCancelled)
	ErrServerError       error = sentinel(CodeServerError)
	ErrResultMalformed   error = sentinel(CodeResultMalformed)
	ErrResultTooLarge    error = sentinel(CodeResultTooLarge)
	ErrOverloaded        error = sentinel(CodeOverloaded)
	ErrRevoked           error = sentinel(CodeRevoked)
	ErrShuttingDown      error = sentinel(CodeShuttingDown)
	ErrSurfaceChanged    error = sentinel(CodeSurfaceChanged)
	ErrInputRequired     error = sentinel(CodeInputRequired)
	ErrQuotaExceeded     error = sentinel(CodeQuotaExceeded)

	ErrBadFrame           error = sentinel(CodeBadFrame)
	ErrFrameTooLarge      error = sentinel(CodeFrameTooLarge)
	ErrBadHello           error = sentinel(CodeBadHello)
	ErrBadToken           error = sentinel(CodeBadToken)
	ErrUnsupportedVersion error = sentinel(CodeUnsupportedVersion)
)

// isCode is the Is method shared by every error type that carries a code.
func isCode(code string, target error) bool {
	switch t := target.(type) {
	case sentinel:
		return string(t) == code
	case *Denied:
		return t.Code == code
	case *FatalMsg:
		return t.Code == code
	case *WireError:
		return t.Code == code
	}
	return false
}

package capwire

import "github.com/vmihailenco/msgpack/v5"

// Version is the wire version this package speaks, sent in hello and
// welcome (docs/capwire.md, "Versioning"); the bridge's server checks a
// hello against it.
const Version = 1

// CapPrefix starts every capability name in v1: a call's cap is
// "mcp.<server>". Client.Call adds it; the bridge strips it.
const CapPrefix = "mcp."

// CapBridge is the capability of capbridge itself: describe and search
// over the tools a grant reaches, and read_resource (docs/capwire.md,
// "The capbridge capability").
const CapBridge = "capbridge"

// Envelope types, the value of "t".
const (
	typeHello   = "hello"
	typeWelcome = "welcome"
	typeCall    = "call"
	typeCancel  = "cancel"
	typeResult  = "result"
	typeDenied  = "denied"
	typeFatal   = "fatal"
)

// Message is one envelope. The set is closed: *HelloMsg, *WelcomeMsg,
// *CallMsg, *CancelMsg, *ResultMsg, *DeniedMsg and *FatalMsg (and types
// that embed one). Programs never see them; the message types are the
// codec that the bridge's server (bridge/internal/capserver), the bridge and the
// fuzz tests share with the Client.
type Message interface {
	// Type is the envelope's "t".
	Type() string
	// appendBody appends the payload (one MessagePack map, no length
	// prefix) to dst. It refuses to write what Decode would reject:
	// strings must be valid UTF-8, codes must belong to their closed set,
	// raw MessagePack fields must be single well-formed values no deeper
	// than bound.MaxDepth.
	appendBody(dst []byte) ([]byte, error)
}

// HelloMsg is the first frame of a connection, client → capbridge.
type HelloMsg struct {
	V     uint64 // wire version the client speaks; 1
	Token string // the grant token handed into the jail
}

// WelcomeMsg answers a good hello, capbridge → client.
type WelcomeMsg struct {
	V       uint64   // wire version capbridge will speak; 1
	Servers []string // the MCP servers the grant reaches
}

// CallMsg invokes a tool, client → capbridge.
type CallMsg struct {
	ID  uint64 // chosen by the client, unique among its calls in flight
	Cap string // "mcp.<server>"
	Op  string // the tool's wire name, verbatim
	// Args is the raw MessagePack map, exactly as it arrived: a sub-slice
	// of the frame (capacity clipped, so appending to it cannot overwrite
	// the frame). It is checked to be one well-formed map no deeper than
	// bound.MaxDepth; its content is the converter's to judge.
	Args      msgpack.RawMessage
	TimeoutMS uint64 // the client's deadline for the call in ms; 0 means none given
	// Traceparent is the W3C trace context of the program's span that
	// made the call ("00-<trace id>-<span id>-<flags>"), or "": capbridge
	// makes its span a child of it and passes the context on to the MCP
	// server. A value that is not a valid traceparent is ignored.
	Traceparent string
}

// CancelMsg abandons a call, client → capbridge.
type CancelMsg struct {
	ID uint64
}

// ResultMsg is a call's outcome when the tool ran, capbridge → client.
type ResultMsg struct {
	ID     uint64
	Result Result
}

// DeniedMsg is a call's outcome when it was refused or could not complete,
// capbridge → client.
type DeniedMsg struct {
	ID uint64
	// NoID marks a denial of a frame whose id could not be recovered (a
	// malformed call); the id field is then omitted on the wire.
	NoID   bool
	Denial Denied
}

// FatalMsg ends a connection, capbridge → client; capbridge closes the
// connection right after sending it. It is also the error a Client reports
// (wrapped with ErrClosed) when capbridge ended the connection with it, so
// errors.Is(err, ErrBadToken) works.
type FatalMsg struct {
	Code    string // one of the fatal codes
	Message string
}

func (f *FatalMsg) Error() string {
	if f.Message == "" {
		return "capwire: fatal: " + f.Code
	}
	return "capwire: fatal: " + f.Code + ": " + f.Message
}

// Is compares Code with target's code.
func (f *FatalMsg) Is(target error) bool { return isCode(f.Code, target) }

func (*HelloMsg) Type() string   { return typeHello }
func (*WelcomeMsg) Type() string { return typeWelcome }
func (*CallMsg) Type() string    { return typeCall }
func (*CancelMsg) Type() string  { return typeCancel }
func (*ResultMsg) Type() string  { return typeResult }
func (*DeniedMsg) Type() string  { return typeDenied }
func (*FatalMsg) Type() string   { return typeFatal }

// knownType reports whether t is a v1 envelope type.
func knownType(t string) bool {
	switch t {
	case typeHello, typeWelcome, typeCall, typeCancel, typeResult, typeDenied, typeFatal:
		return true
	}
	return false
}

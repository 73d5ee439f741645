package mcpwire

import (
	"context"

	"github.com/capbridge/capbridge/internal/w3ctrace"
)

// A carrier moves one Client's JSON-RPC messages to and from its server.
// It is the seam between the protocol, which the Client runs once for
// every transport (calls and their settlement, the eras, what each
// incoming message means: dispatch.go), and how messages travel. There
// are two:
//
//   - the stream carrier (stream.go) over a Conn: a byte stream of
//     newline-delimited messages in each direction. The stdio child
//     process is one; the legacy HTTP+SSE transport is another (its Read
//     is the SSE stream's messages as lines, its Write posts each line).
//     Callers write their own lines (group commit) and read their own
//     replies (readside), so a call in flight alone involves no
//     goroutine hand-over.
//   - the HTTP carrier (streamable.go), Streamable HTTP: one POST per
//     message. The caller posts its request and reads the response
//     itself, a JSON body or an SSE stream of messages that ends with
//     its reply, so there is no hand-over either; the server's other
//     messages arrive on long-lived streams that a goroutine reads.
//
// Either way every incoming message goes through the same
// Client.handleLine / handleMessage, so a response settles its call,
// progress extends its deadline, and a notification or server request
// is handled identically whatever carried it.
//
// Concurrency: roundTrip and send are called by any number of callers
// at once; the Locked methods with Client.mu held.
type carrier interface {
	// roundTrip sends line, the request of cl, and returns once cl is
	// settled (nil) or its caller gives up on it (ctx's error, or
	// ErrTimeout at cl's expiry). cl is in Client.calls throughout.
	// sent false means the request certainly did not reach the server:
	// the caller retires cl with why. roundTrip may keep line only until
	// it returns.
	roundTrip(ctx context.Context, cl *call, req outbound, line []byte, gather bool) (sent bool, why error)
	// send sends a notification or a response, bounded by the write
	// timeout.
	send(ctx context.Context, req outbound, line []byte) error
	// listen opens the subscriptions/listen stream whose request is
	// line; unlisten ends it (on a stream carrier by
	// notifications/cancelled, over HTTP by closing its response).
	listen(ctx context.Context, id int64, line []byte) error
	unlisten(id int64)
	// negotiated records the revision initialize settled on;
	// established runs once the handshake is done (the HTTP carrier
	// opens the GET stream then).
	negotiated(version string)
	established(ctx context.Context)
	// cancels says whether a call given up on is cancelled with
	// notifications/cancelled. Over HTTP in the 2026-07-28 era closing
	// the request's response is the cancellation, and the notification
	// is not expected.
	cancels() bool
	// sendAside sends a notification or a response no caller waits
	// for (a cancellation, the answer to a server's request), without
	// holding whoever runs it for a server that does not take it: on a
	// stream it is written at once, bounded by the write timeout; over
	// HTTP it is posted in the background, and dropped when too many
	// are in flight (both are advisory). sendAside may keep line.
	sendAside(req outbound, line []byte)
	// electLocked runs when a call leaves Client.calls without being
	// settled by what was read (its caller gave up): a stream carrier
	// passes the reading side on. Under Client.mu.
	electLocked()
	// endLocked runs once, when the client dies, after every call was
	// settled. Under Client.mu.
	endLocked()
	// tail is the end of what the server wrote beside the protocol (a
	// child's stderr), bounded; may be empty.
	tail() []byte
	// shutdown ends the server connection and releases every resource
	// (a child's shutdown sequence; an HTTP session's DELETE), bounded
	// by the transport's waits. It runs once, after endLocked.
	shutdown() (Exit, error)
	// readersDone is closed once nothing reads for the client again.
	readersDone() <-chan struct{}
	// pid is the server's process id, 0 when it is not a process.
	pid() int
	// kind names the transport: "stdio", "sse", "streamable-http", or
	// "stream" for an embedder's Conn.
	kind() string
}

// outbound describes a message being sent, for a carrier that mirrors
// parts of it into its own headers (Streamable HTTP's Mcp-Method and
// Mcp-Name).
type outbound struct {
	method string
	// name is tools/call's tool name.
	name string
	// args are tools/call's arguments (for x-mcp-header mirroring).
	args Args
	// traceparent is tools/call's CallOptions.Traceparent, for the
	// header, all zeros when there is none. Copied in rather than
	// referenced: a string out of CallOptions passed on through the
	// carrier interface would make the compiler move every caller's
	// CallOptions (its Abandoned closure too) to the heap.
	traceparent [w3ctrace.Len]byte
}

// traceparentHeader is the traceparent header's value, "" for none.
func (o *outbound) traceparentHeader() string {
	if o.traceparent[0] == 0 {
		return ""
	}
	return string(o.traceparent[:])
}

package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/bridge/internal/unixsock"
	"github.com/capbridge/capbridge/capwire"
)

// Client speaks the control plane over one connection: the CLI uses it,
// and a harness written in Go may too. It is not safe for concurrent use
// (requests on a connection are answered one at a time). A refusal is
// returned as an *Error, a call's denial as a *capwire.Denied; any other
// error (including ctx ending before the reply) means the connection is
// out of step or gone: the Client closes it, every later request fails
// with that error, and a call still running at the server is cancelled.
type Client struct {
	conn   net.Conn
	fr     *capwire.FrameReader
	seq    uint64
	broken error
}

// Dial connects to the control socket at path.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("control: socket %s: %w (is capbridge serve running?)", path, err)
	}
	return &Client{conn: conn, fr: capwire.NewFrameReader(conn, MaxFrame)}, nil
}

// DialOwn is Dial for a socket at a path nobody named, the default one:
// its directory may be /tmp/capbridge-UID, which any local user can create
// before capbridge does, and a request carries tokens and a call's
// arguments. It refuses, before sending anything, a directory that is
// not ours or root's or that others may write to (as serve refuses to
// listen in one), and a socket that neither we nor root serve. A
// bridge run as another user is reached by naming its socket.
func DialOwn(ctx context.Context, path string) (*Client, error) {
	if err := unixsock.CheckDir(filepath.Dir(path)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("control: socket %s: %w (is capbridge serve running?)", path, err)
		}
		return nil, &UntrustedError{Path: path, Reason: err.Error()}
	}
	c, err := Dial(ctx, path)
	if err != nil {
		return nil, err
	}
	uc, _ := c.conn.(*net.UnixConn) // a "unix" dial's connection
	cred, err := unixsock.ReadPeerCred(uc)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("control: socket %s: %w", path, err)
	}
	if cred.UID != 0 && int(cred.UID) != os.Geteuid() {
		c.Close()
		return nil, &UntrustedError{Path: path, Reason: fmt.Sprintf("it is served by uid %d, not by us (uid %d) or root", cred.UID, os.Geteuid())}
	}
	return c, nil
}

// An UntrustedError is DialOwn's refusal of a socket that another user
// may have put at the default path. Nothing was sent to it.
type UntrustedError struct {
	Path   string
	Reason string // the directory's owner or mode, or the uid serving the socket
}

func (e *UntrustedError) Error() string {
	return "control: socket " + e.Path + " may be another user's: " + e.Reason
}

// Close closes the connection. A call in progress at the server is then
// cancelled.
func (c *Client) Close() error { return c.conn.Close() }

// Grant issues a grant.
func (c *Client) Grant(ctx context.Context, r *GrantRequest) (*Granted, error) {
	return request[Granted](ctx, c, opGrant, r, replyGranted)
}

// Revoke ends a grant, named by its id or its token.
func (c *Client) Revoke(ctx context.Context, r *RevokeRequest) (*Revoked, error) {
	return request[Revoked](ctx, c, opRevoke, r, replyRevoked)
}

// Status reports the servers, the live grants and the open connections.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	return request[Status](ctx, c, opStatus, &struct{}{}, replyStatus)
}

// Facade fetches a server's generated façade and surface.
func (c *Client) Facade(ctx context.Context, r *FacadeRequest) (*Facade, error) {
	return request[Facade](ctx, c, opFacade, r, replyFacade)
}

// Describe fetches the full declarations of some of a server's tools.
func (c *Client) Describe(ctx context.Context, r *DescribeRequest) (*Described, error) {
	return request[Described](ctx, c, opDescribe, r, replyDescribed)
}

// Search ranks the tools of one or more servers by a query.
func (c *Client) Search(ctx context.Context, r *SearchRequest) (*Found, error) {
	return request[Found](ctx, c, opSearch, r, replyFound)
}

// Listing fetches the tools/list result a server's façade was generated
// from, as JSON.
func (c *Client) Listing(ctx context.Context, r *ListingRequest) (*Listed, error) {
	return request[Listed](ctx, c, opListing, r, replyListed)
}

// Resources fetches a server's resources and resource templates.
func (c *Client) Resources(ctx context.Context, r *ResourcesRequest) (*ResourceList, error) {
	return request[ResourceList](ctx, c, opResources, r, replyResourced)
}

// Surface fetches the lock of the tool surface the bridge serves (see
// Surface).
func (c *Client) Surface(ctx context.Context) (*Surface, error) {
	return request[Surface](ctx, c, opSurface, &SurfaceRequest{}, replySurface)
}

// Reload asks the bridge to read its configuration again and apply it.
// A configuration that does not validate is an *Error coded
// CodeBadConfig; the running one stays.
func (c *Client) Reload(ctx context.Context) (*Reloaded, error) {
	return request[Reloaded](ctx, c, opReload, &ReloadRequest{}, replyReloaded)
}

// Metrics fetches the bridge's metrics in the Prometheus text format.
func (c *Client) Metrics(ctx context.Context) (*Metrics, error) {
	return request[Metrics](ctx, c, opMetrics, &MetricsRequest{}, replyMetrics)
}

// Call calls a tool with operator authority. A tool that ran and failed
// is a result with IsError; a call that was refused or could not
// complete returns a *capwire.Denied, so errors.Is(err, capwire.ErrTimeout)
// and the like hold.
func (c *Client) Call(ctx context.Context, r *CallRequest) (*capwire.Result, error) {
	id, frame, err := c.exchange(ctx, opCall, r)
	if err != nil {
		return nil, err
	}
	m, err := capwire.Decode(frame)
	var we *capwire.WireError
	if errors.As(err, &we) && we.Type == replyError {
		return nil, c.refusal(frame, id)
	}
	if err != nil {
		return nil, c.fail(fmt.Errorf("control: malformed call reply: %w", err))
	}
	switch m := m.(type) {
	case *capwire.ResultMsg:
		if m.ID == id {
			return &m.Result, nil
		}
	case *capwire.DeniedMsg:
		if !m.NoID && m.ID == id {
			return nil, &m.Denial
		}
	default:
		return nil, c.fail(fmt.Errorf("control: a call answered with %q", m.Type()))
	}
	return nil, c.fail(fmt.Errorf("control: the reply is not for call %d", id))
}

// request sends req as a request of kind op and decodes the reply, which
// must be of kind want.
func request[Rep any](ctx context.Context, c *Client, op string, req any, want string) (*Rep, error) {
	id, frame, err := c.exchange(ctx, op, req)
	if err != nil {
		return nil, err
	}
	var h head
	if err := decode(frame, &h); err != nil {
		return nil, c.fail(fmt.Errorf("control: malformed %s reply: %w", op, err))
	}
	switch {
	case h.T == replyError:
		return nil, c.refusal(frame, id)
	case h.ID != id:
		return nil, c.fail(fmt.Errorf("control: reply for request %d, want %d", h.ID, id))
	case h.T != want:
		return nil, c.fail(fmt.Errorf("control: %s answered with %q, want %q", op, h.T, want))
	}
	var rep Rep
	if err := msgpack.Unmarshal(frame, &rep); err != nil {
		return nil, c.fail(fmt.Errorf("control: malformed %s reply: %w", want, err))
	}
	return &rep, nil
}

// refusal decodes an "error" reply to request id into an *Error. Id 0
// means the server could not read the request far enough to name it.
func (c *Client) refusal(frame []byte, id uint64) error {
	var e struct {
		head
		Error
	}
	if err := decode(frame, &e); err != nil {
		return c.fail(fmt.Errorf("control: malformed error reply: %w", err))
	}
	if e.ID != id && e.ID != 0 {
		return c.fail(fmt.Errorf("control: error reply for request %d, want %d", e.ID, id))
	}
	if e.Code == "" {
		// A server older than error codes.
		e.Code = CodeInternal
	}
	return &e.Error
}

// exchange sends one request and reads one reply frame. ctx bounds both.
func (c *Client) exchange(ctx context.Context, op string, req any) (uint64, []byte, error) {
	if c.broken != nil {
		return 0, nil, c.broken
	}
	c.seq++
	id := c.seq
	frame, err := appendFrame(nil, op, id, req)
	if err != nil {
		return 0, nil, err
	}
	d, _ := ctx.Deadline()
	_ = c.conn.SetDeadline(d)
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.conn.Write(frame); err != nil {
		if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
			// A server that will not serve the connection (Refuse)
			// answers and closes it without reading the request: the
			// answer may be waiting, and says why.
			reply, rerr := c.fr.ReadFrame(nil)
			werr := c.fail(c.ioErr(ctx, op, err))
			if rerr != nil {
				return 0, nil, werr
			}
			return id, reply, nil
		}
		return 0, nil, c.fail(c.ioErr(ctx, op, err))
	}
	reply, err := c.fr.ReadFrame(nil)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, c.fail(c.ioErr(ctx, op, err))
	}
	return id, reply, nil
}

// ioErr names why a request's exchange failed: ctx's cause when it ended
// the exchange, else the transport's error.
func (c *Client) ioErr(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("control: %s: %w", op, context.Cause(ctx))
	}
	return fmt.Errorf("control: %s: %w", op, err)
}

// fail marks the connection out of step (a reply was lost or garbled, so
// the next one read could answer the wrong request) and closes it, which
// also cancels a call the server may still be running for a request
// whose ctx ended.
func (c *Client) fail(err error) error {
	c.broken = err
	_ = c.conn.Close()
	return err
}

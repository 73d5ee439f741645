package control

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// fakeHandler answers from fixed data; its Call's behaviour is chosen by
// the tool's name.
type fakeHandler struct {
	entered chan struct{} // "wait" has started
	cause   chan error    // "wait" ended, with its context's cause
}

func newFake() *fakeHandler {
	return &fakeHandler{entered: make(chan struct{}, 1), cause: make(chan error, 1)}
}

func (*fakeHandler) Grant(_ context.Context, r *GrantRequest) (*Granted, error) {
	if _, ok := r.Servers["s"]; !ok {
		return nil, &Error{Code: CodeUnknownServer, Message: "no such server"}
	}
	g := &Granted{Token: "tok", Grant: "id"}
	if r.TTLMS != nil {
		g.ExpiresMS = int64(*r.TTLMS)
	}
	return g, nil
}

func (*fakeHandler) Revoke(_ context.Context, r *RevokeRequest) (*Revoked, error) {
	return &Revoked{Found: r.Grant == "id"}, nil
}

func (*fakeHandler) Metrics(context.Context, *MetricsRequest) (*Metrics, error) {
	return &Metrics{Text: "# TYPE capbridge_grants_live gauge\ncapbridge_grants_live 1\n"}, nil
}

func (*fakeHandler) Surface(context.Context, *SurfaceRequest) (*Surface, error) {
	return &Surface{Lock: "{\"version\":1}\n", Down: map[string]string{"d": "failed"}}, nil
}

func (*fakeHandler) Reload(context.Context, *ReloadRequest) (*Reloaded, error) {
	return &Reloaded{AtMS: 5, Trigger: "control", Added: []string{"b"}, Changed: []string{"a"}}, nil
}

func (*fakeHandler) Status(context.Context) (*Status, error) {
	return &Status{Servers: []ServerStatus{{Name: "s", State: "ready", PID: 7}}, Grants: 1, Connections: 2}, nil
}

func (*fakeHandler) Facade(_ context.Context, r *FacadeRequest) (*Facade, error) {
	switch r.Server {
	case "s":
		return &Facade{Module: "s", Source: "package s\n", Surface: "s.F()", Preamble: "// p\n", ListingSHA256: "ab"}, nil
	case "huge":
		return &Facade{Source: strings.Repeat("x", MaxFrame)}, nil
	}
	return nil, errors.New("the façade generator broke")
}

func (*fakeHandler) Describe(_ context.Context, r *DescribeRequest) (*Described, error) {
	if r.Server != "s" {
		return nil, &Error{Code: CodeUnknownServer, Message: "no such server"}
	}
	return &Described{Module: "s", Declarations: "func " + strings.Join(r.Tools, "(ctx)\nfunc ") + "(ctx)\n"}, nil
}

func (*fakeHandler) Search(_ context.Context, r *SearchRequest) (*Found, error) {
	if r.Query == "" {
		return nil, &Error{Code: CodeBadRequest, Message: "empty query"}
	}
	return &Found{Matches: []Match{{Server: "s", Func: "F", Tool: "f", Signature: "s.F(ctx)", Score: int(r.Limit)}}}, nil
}

func (*fakeHandler) Listing(_ context.Context, r *ListingRequest) (*Listed, error) {
	if r.Server != "s" {
		return nil, &Error{Code: CodeUnknownServer, Message: "no such server"}
	}
	return &Listed{Listing: `{"tools":[{"name":"f","inputSchema":{"type":"object"}}]}`}, nil
}

func (*fakeHandler) Resources(_ context.Context, r *ResourcesRequest) (*ResourceList, error) {
	if r.Server != "x" {
		return nil, errorf(CodeUnknownServer, "no server %q", r.Server)
	}
	return &ResourceList{Resources: `[{"uri":"test://a","name":"a"}]`, Templates: "[]"}, nil
}

func (f *fakeHandler) Call(ctx context.Context, r *CallRequest) (*capwire.Result, error) {
	switch r.Tool {
	case "echo":
		var args struct {
			Text string `msgpack:"text"`
		}
		if err := msgpack.Unmarshal(r.Args, &args); err != nil {
			return nil, &capwire.Denied{Code: capwire.CodeBadArguments, Message: err.Error()}
		}
		return &capwire.Result{Content: []capwire.Block{{Type: capwire.BlockText, Kind: capwire.KindText, Text: args.Text}}, Structured: r.Args}, nil
	case "slow":
		return nil, &capwire.Denied{Code: capwire.CodeTimeout, Message: "too slow"}
	case "huge":
		return &capwire.Result{Content: []capwire.Block{{Type: capwire.BlockText, Kind: capwire.KindText, Text: strings.Repeat("x", MaxFrame)}}}, nil
	case "wait":
		select {
		case f.entered <- struct{}{}:
		default:
		}
		<-ctx.Done()
		select {
		case f.cause <- context.Cause(ctx):
		default:
		}
		return nil, &capwire.Denied{Code: capwire.CodeCancelled, Message: "cancelled"}
	}
	return nil, errors.New("boom")
}

// pipe serves h on one end of an in-memory connection and returns a
// client on the other; done is closed when ServeConn returns.
func pipe(h Handler, writeTimeout time.Duration) (c *Client, done chan struct{}) {
	srv, cli := net.Pipe()
	done = make(chan struct{})
	go func() {
		defer close(done)
		(&Server{Handler: h, WriteTimeout: writeTimeout}).ServeConn(context.Background(), srv)
	}()
	return &Client{conn: cli, fr: capwire.NewFrameReader(cli, MaxFrame)}, done
}

// Each request and its reply, typed through the serve loop and back.
func TestRoundTrips(t *testing.T) {
	defer leakcheck.Check(t)()
	c, done := pipe(newFake(), 0)
	ctx := context.Background()

	uid := uint32(3)
	if g, err := c.Grant(ctx, &GrantRequest{Servers: map[string][]string{"s": {"a"}}, TTLMS: new(uint64(42)), PeerUID: &uid}); err != nil || *g != (Granted{Token: "tok", Grant: "id", ExpiresMS: 42}) {
		t.Errorf("grant: %+v, %v", g, err)
	}
	if r, err := c.Revoke(ctx, &RevokeRequest{Grant: "id"}); err != nil || !r.Found {
		t.Errorf("revoke: %+v, %v", r, err)
	}
	if r, err := c.Revoke(ctx, &RevokeRequest{Grant: "other"}); err != nil || r.Found {
		t.Errorf("revoke of nothing: %+v, %v", r, err)
	}
	want := Status{Servers: []ServerStatus{{Name: "s", State: "ready", PID: 7}}, Grants: 1, Connections: 2}
	if st, err := c.Status(ctx); err != nil || !reflect.DeepEqual(*st, want) {
		t.Errorf("status: %+v, %v", st, err)
	}
	if sf, err := c.Surface(ctx); err != nil || sf.Lock != "{\"version\":1}\n" || sf.Down["d"] != "failed" {
		t.Errorf("surface: %+v, %v", sf, err)
	}
	if r, err := c.Reload(ctx); err != nil || !reflect.DeepEqual(*r, Reloaded{AtMS: 5, Trigger: "control", Added: []string{"b"}, Changed: []string{"a"}}) {
		t.Errorf("reload: %+v, %v", r, err)
	}
	if m, err := c.Metrics(ctx); err != nil || m.Text != "# TYPE capbridge_grants_live gauge\ncapbridge_grants_live 1\n" {
		t.Errorf("metrics: %+v, %v", m, err)
	}
	if f, err := c.Facade(ctx, &FacadeRequest{Server: "s"}); err != nil || *f != (Facade{Module: "s", Source: "package s\n", Surface: "s.F()", Preamble: "// p\n", ListingSHA256: "ab"}) {
		t.Errorf("facade: %+v, %v", f, err)
	}
	if d, err := c.Describe(ctx, &DescribeRequest{Server: "s", Tools: []string{"F", "g-h"}}); err != nil || *d != (Described{Module: "s", Declarations: "func F(ctx)\nfunc g-h(ctx)\n"}) {
		t.Errorf("describe: %+v, %v", d, err)
	}
	wantFound := Found{Matches: []Match{{Server: "s", Func: "F", Tool: "f", Signature: "s.F(ctx)", Score: 7}}}
	if f, err := c.Search(ctx, &SearchRequest{Servers: []string{"s"}, Query: "f", Limit: 7}); err != nil || !reflect.DeepEqual(*f, wantFound) {
		t.Errorf("search: %+v, %v", f, err)
	}
	if _, err := c.Describe(ctx, &DescribeRequest{Server: "x"}); !errors.Is(err, &Error{Code: CodeUnknownServer}) {
		t.Errorf("describe of an unknown server: %v", err)
	}
	if _, err := c.Search(ctx, &SearchRequest{}); !errors.Is(err, &Error{Code: CodeBadRequest}) {
		t.Errorf("search with no query: %v", err)
	}
	if l, err := c.Listing(ctx, &ListingRequest{Server: "s"}); err != nil || l.Listing != `{"tools":[{"name":"f","inputSchema":{"type":"object"}}]}` {
		t.Errorf("listing: %+v, %v", l, err)
	}
	if l, err := c.Resources(ctx, &ResourcesRequest{Server: "x"}); err != nil || l.Resources != `[{"uri":"test://a","name":"a"}]` || l.Templates != "[]" {
		t.Errorf("resources: %+v, %v", l, err)
	}
	if _, err := c.Resources(ctx, &ResourcesRequest{Server: "y"}); !errors.Is(err, &Error{Code: CodeUnknownServer}) {
		t.Errorf("resources of an unknown server: %v", err)
	}
	if _, err := c.Listing(ctx, &ListingRequest{Server: "x"}); !errors.Is(err, &Error{Code: CodeUnknownServer}) {
		t.Errorf("listing of an unknown server: %v", err)
	}
	args, _ := msgpack.Marshal(map[string]any{"text": "hi"})
	r, err := c.Call(ctx, &CallRequest{Server: "s", Tool: "echo", Args: args, TimeoutMS: 5})
	if err != nil || r.Text() != "hi" || !bytes.Equal(r.Structured, args) {
		t.Errorf("call: %+v, %v", r, err)
	}

	// Refusals keep their codes; none of them breaks the connection.
	_, err = c.Grant(ctx, &GrantRequest{Servers: map[string][]string{"x": nil}})
	if !errors.Is(err, &Error{Code: CodeUnknownServer}) || errors.Is(err, &Error{Code: CodeUnknownTool}) {
		t.Errorf("grant of an unknown server: %v", err)
	}
	var ce *Error
	if _, err := c.Facade(ctx, &FacadeRequest{Server: "x"}); !errors.As(err, &ce) || ce.Code != CodeInternal || !strings.Contains(ce.Message, "generator broke") {
		t.Errorf("facade failing: %v, want internal", err)
	}
	if _, err := c.Facade(ctx, &FacadeRequest{Server: "huge"}); !errors.Is(err, &Error{Code: CodeTooLarge}) {
		t.Errorf("facade too large for a frame: %v", err)
	}
	var d *capwire.Denied
	if _, err := c.Call(ctx, &CallRequest{Tool: "slow"}); !errors.Is(err, capwire.ErrTimeout) || !errors.As(err, &d) || d.Message != "too slow" {
		t.Errorf("denied call: %v", err)
	}
	if _, err := c.Call(ctx, &CallRequest{Tool: "huge"}); !errors.Is(err, capwire.ErrResultTooLarge) {
		t.Errorf("call with a result too large for a frame: %v", err)
	}
	if _, err := c.Call(ctx, &CallRequest{Tool: "nope"}); !errors.Is(err, &Error{Code: CodeInternal}) {
		t.Errorf("call failing: %v", err)
	}
	if _, err := c.Status(ctx); err != nil {
		t.Errorf("status after the refusals: %v", err)
	}
	c.Close()
	<-done
}

// A client hanging up while a call runs ends the call's context at once,
// over a real Unix socket, whether it closes the connection or gives up on
// the call (its ctx ends); calls that end on their own leave no watcher
// behind.
func TestHangupCancelsCall(t *testing.T) {
	defer leakcheck.Check(t)()
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "c.sock"))
	if err != nil {
		t.Fatal(err)
	}
	h := newFake()
	var served sync.WaitGroup
	served.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			served.Go(func() { (&Server{Handler: h}).ServeConn(context.Background(), conn) })
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args, _ := msgpack.Marshal(map[string]any{"text": "hi"})
	for _, giveUp := range []string{"close", "ctx"} {
		c, err := Dial(ctx, l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			if r, err := c.Call(ctx, &CallRequest{Tool: "echo", Args: args}); err != nil || r.Text() != "hi" {
				t.Fatalf("call: %+v, %v", r, err)
			}
		}
		callCtx, callCancel := context.WithCancel(ctx)
		called := make(chan error, 1)
		go func() {
			_, err := c.Call(callCtx, &CallRequest{Tool: "wait"})
			called <- err
		}()
		<-h.entered
		if giveUp == "close" {
			c.Close()
		} else {
			callCancel()
		}
		if cause := <-h.cause; !errors.Is(cause, errHangup) {
			t.Errorf("%s: the call ended with %v, want the hang-up", giveUp, cause)
		}
		err = <-called
		if err == nil {
			t.Errorf("%s: a call given up on returned a reply", giveUp)
		}
		if _, again := c.Status(ctx); again == nil || !errors.Is(again, err) {
			t.Errorf("%s: status after the call was given up on: %v, want %v", giveUp, again, err)
		}
		callCancel()
	}
	l.Close()
	served.Wait()
}

// A connection that sends nothing for five minutes is closed; each
// request starts the five minutes again.
func TestIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, done := pipe(newFake(), 0)
		time.Sleep(idleTimeout - time.Second)
		if _, err := c.Status(context.Background()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(idleTimeout - time.Second)
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("closed before it was idle for the whole timeout")
		default:
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("still open after the idle timeout")
		}
		if _, err := c.Status(context.Background()); err == nil {
			t.Error("a request after the idle close was answered")
		}
		c.Close()
	})
}

// A client that does not take its reply loses the connection after
// WriteTimeout.
func TestWriteTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, done := pipe(newFake(), 5*time.Second)
		frame, err := appendFrame(nil, opStatus, 1, &struct{}{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.conn.Write(frame); err != nil {
			t.Fatal(err)
		}
		time.Sleep(6 * time.Second)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("still open with a reply not taken past the write timeout")
		}
		c.Close()
	})
}

// A frame the server cannot decode is answered with id 0, and the
// client reports the server's error rather than an id mismatch.
func TestMalformedRequest(t *testing.T) {
	defer leakcheck.Check(t)()
	c, done := pipe(newFake(), 0)
	// "servers" as an array where a map goes: decoded far enough to
	// name the request, so its id is kept.
	frame, _ := appendFrame(nil, opGrant, 1, map[string]any{"servers": []int{1}})
	if _, err := c.conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	reply, err := c.fr.ReadFrame(nil)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		head
		Error
	}
	if err := decode(reply, &e); err != nil || e.T != replyError || e.ID != 1 || e.Code != CodeBadRequest {
		t.Errorf("grant with an array of servers: %+v, %v", e, err)
	}
	// Binary where "t" goes: cannot be named, so id 0; the client takes
	// it as the answer to its request.
	c.seq = 1
	body := []byte{0x82, 0xa1, 't', 0xc4, 0x01, 0x00, 0xa2, 'i', 'd', 0x02}
	frame, _ = capwire.AppendFramed(nil, 0, func(b []byte) ([]byte, error) { return append(b, body...), nil })
	if _, err := c.conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	reply, err = c.fr.ReadFrame(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.refusal(reply, 2); !errors.Is(err, &Error{Code: CodeBadRequest}) || !strings.Contains(err.Error(), "malformed control request") {
		t.Errorf("undecodable frame: %v", err)
	}
	c.Close()
	<-done
}

// decode refuses a frame whose container counts are not backed by bytes
// before msgpack's reflective decoder could allocate for them.
func TestDecodeRefusesLyingCounts(t *testing.T) {
	for name, frame := range map[string][]byte{
		"map32":   {0x82, 0xa1, 't', 0xa5, 'g', 'r', 'a', 'n', 't', 0xa7, 's', 'e', 'r', 'v', 'e', 'r', 's', 0xdf, 0x7f, 0xff, 0xff, 0xff},
		"array32": {0x82, 0xa1, 't', 0xa5, 'g', 'r', 'a', 'n', 't', 0xa7, 's', 'e', 'r', 'v', 'e', 'r', 's', 0x81, 0xa1, 's', 0xdd, 0x7f, 0xff, 0xff, 0xff},
		"str32":   {0x81, 0xa1, 't', 0xdb, 0x7f, 0xff, 0xff, 0xff, 'g'},
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		var r GrantRequest
		err := decode(frame, &r)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%s: decoded %+v", name, r)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
			t.Errorf("%s: %d bytes allocated for a %d-byte frame", name, n, len(frame))
		}
	}
}

// Only the closed set of codes goes on the wire, and messages are
// bounded, valid UTF-8.
func TestErrorReplyIsBounded(t *testing.T) {
	frame := appendError(nil, 3, &Error{Code: "made_up", Message: strings.Repeat("\xff", 2*maxMessage)})
	payload, err := capwire.NewFrameReader(bytes.NewReader(frame), 0).ReadFrame(nil)
	if err != nil {
		t.Fatal(err)
	}
	var e Error
	if err := decode(payload, &e); err != nil || e.Code != CodeInternal || len(e.Message) > maxMessage+len("…") {
		t.Errorf("error reply: code %q, %d bytes of message, %v", e.Code, len(e.Message), err)
	}
}

// Whatever a request frame holds, the server answers it with one frame
// that decodes: capwire's envelope for a call, an "error" or the
// request's reply otherwise; it never panics.
func FuzzAnswer(f *testing.F) {
	for _, seed := range []struct {
		t    string
		body any
	}{
		{opGrant, &GrantRequest{Servers: map[string][]string{"s": {"a"}}, TTLMS: new(uint64(5))}},
		{opRevoke, &RevokeRequest{Grant: "id"}},
		{opStatus, &struct{}{}},
		{opFacade, &FacadeRequest{Server: "s"}},
		{opListing, &ListingRequest{Server: "s"}},
		{opCall, &CallRequest{Tool: "echo", Args: msgpack.RawMessage{0x81, 0xa4, 't', 'e', 'x', 't', 0xa1, 'x'}}},
		{opCall, &CallRequest{Tool: "slow"}},
	} {
		frame, err := appendFrame(nil, seed.t, 1, seed.body)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(frame[4:])
	}
	srv := &Server{Handler: newFake()}
	// Ended, so that a call of "wait" returns at once.
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, frame []byte) {
		out := srv.answer(ended, nil, frame, nil)
		payload, err := capwire.NewFrameReader(bytes.NewReader(out), MaxFrame).ReadFrame(nil)
		if err != nil {
			t.Fatalf("reply frame: %v", err)
		}
		if _, err := capwire.Decode(payload); err == nil {
			return // a call's result or denial
		}
		var h head
		if err := decode(payload, &h); err != nil || h.T == "" {
			t.Fatalf("reply % x: %+v, %v", payload, h, err)
		}
	})
}

// A server that refuses a connection (Refuse) answers and closes it
// without reading the request; a client whose request then finds the
// connection closed (EPIPE) reads the answer, which says why, rather than
// reporting a broken pipe.
func TestRefusalReadAfterClosedWrite(t *testing.T) {
	defer leakcheck.Check(t)()
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "c.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	refused := make(chan struct{})
	go func() {
		defer close(refused)
		conn, err := l.Accept()
		if err != nil {
			return
		}
		Refuse(conn, &Error{Code: CodeBusy, Message: "every connection is open"}, time.Minute)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a backstop
	defer cancel()
	c, err := Dial(ctx, l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-refused // answered and closed before the request is written
	if _, err := c.Status(ctx); !errors.Is(err, &Error{Code: CodeBusy}) {
		t.Fatalf("Status on a refused connection: %v, want busy", err)
	}
	if _, err := c.Status(ctx); err == nil {
		t.Error("the refused connection served a second request")
	}
}

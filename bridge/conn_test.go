package bridge

import (
	"bytes"
	"net"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/internal/capserver"
	"github.com/capbridge/capbridge/capwire"
)

// Every call gets its one reply whatever its denial quotes: a denial whose
// text is not UTF-8, which capwire refuses to encode, is sent sanitized,
// with its id and code, instead of being dropped.
func TestReplyAnswersWhatDoesNotEncode(t *testing.T) {
	b := New(Options{Config: config.Defaults(), Log: zerolog.Nop(), Audit: zerolog.Nop()})
	srv, client := net.Pipe()
	defer client.Close()
	c := &callConn{b: b, sc: capserver.New(srv, capserver.Config{})}
	defer c.sc.Close()
	for _, tc := range []struct {
		name string
		in   capwire.Denied
		want capwire.Denied
	}{
		{"valid", capwire.Denied{Code: capwire.CodeInputRequired, Message: "wants é"},
			capwire.Denied{Code: capwire.CodeInputRequired, Message: "wants é"}},
		{"message cut mid-rune", capwire.Denied{Code: capwire.CodeInputRequired, Message: "key aaa\xc3… (elicitation/create)"},
			capwire.Denied{Code: capwire.CodeInputRequired, Message: "key aaa\uFFFD… (elicitation/create)"}},
		{"path", capwire.Denied{Code: capwire.CodeBadArguments, Message: "m", Path: "/k\xff"},
			capwire.Denied{Code: capwire.CodeBadArguments, Message: "m", Path: "/k\uFFFD"}},
		{"unknown code", capwire.Denied{Code: "made_up", Message: "m"},
			capwire.Denied{Code: capwire.CodeBadRequest, Message: `capbridge could not encode its denial: capwire: encoding denied: code: "made_up" is not a denial code`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := make(chan capwire.Message, 1)
			go func() {
				f, err := capwire.NewFrameReader(client, 0).ReadFrame(nil)
				if err != nil {
					got <- nil
					return
				}
				m, _ := capwire.Decode(f)
				got <- m
			}()
			sent := c.reply(&capwire.DeniedMsg{ID: 42, Denial: tc.in}, false)
			d, ok := (<-got).(*capwire.DeniedMsg)
			if !ok || d.ID != 42 || d.Denial != tc.want {
				t.Fatalf("reply = %+v, want id 42 and %+v", d, tc.want)
			}
			if *sent != tc.want || !utf8.ValidString(sent.Message) {
				t.Errorf("reply reported %+v as sent, want %+v", *sent, tc.want)
			}
		})
	}
}

// A connection holds only its reader, whatever its calls: they run on the
// bridge's workers, which are kept between calls and shared by every
// connection, so calls one after another, on one connection or another,
// start one worker between them; Shutdown ends it.
func TestCallsRunOnPooledWorkers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, token := bubbleBridge(t, func(*config.Bridge) {})
		connect := func() (net.Conn, *capwire.FrameReader, chan struct{}) {
			client, ended := pipeCall(b, 1000)
			fr := capwire.NewFrameReader(client, 0)
			pipeSend(t, client, &capwire.HelloMsg{V: 1, Token: token})
			if m := pipeRecv(t, fr); m.Type() != "welcome" {
				t.Fatalf("got %#v, want welcome", m)
			}
			return client, fr, ended
		}
		call := func(client net.Conn, fr *capwire.FrameReader, id uint64) {
			t.Helper()
			// Denied at once: the server never booted.
			pipeSend(t, client, &capwire.CallMsg{ID: id, Cap: "mcp.t", Op: "echo", Args: []byte{0x80}})
			if d, ok := pipeRecv(t, fr).(*capwire.DeniedMsg); !ok || d.ID != id || d.Denial.Code != capwire.CodeServerUnavailable {
				t.Fatalf("got %#v, want server_unavailable for %d", d, id)
			}
			synctest.Wait()
		}
		c1, fr1, ended1 := connect()
		synctest.Wait()
		if r, w := goroutines(); r != 1 || w != 0 {
			t.Fatalf("after the hello: %d readers, %d workers; want the reader alone", r, w)
		}
		for id := range uint64(3) {
			call(c1, fr1, id)
			if r, w := goroutines(); r != 1 || w != 1 {
				t.Errorf("after call %d: %d readers, %d workers; want 1 and 1", id, r, w)
			}
		}
		c2, fr2, ended2 := connect()
		call(c2, fr2, 7)
		if r, w := goroutines(); r != 2 || w != 1 {
			t.Errorf("after a call on a second connection: %d readers, %d workers; want 2 and the same worker", r, w)
		}
		c1.Close()
		c2.Close()
		<-ended1
		<-ended2
		if err := b.Shutdown(time.Second); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if r, w := goroutines(); r != 0 || w != 0 {
			t.Errorf("after Shutdown: %d readers, %d workers; want none", r, w)
		}
	})
}

// The workers kept idle are bounded: beyond maxIdleWorkers a worker with
// nothing to run exits, and close ends those kept.
func TestIdleWorkersBounded(t *testing.T) {
	var p workerPool
	wakes := make([]chan struct{}, maxIdleWorkers+1)
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
		if _, ok := p.take(wakes[i]); ok {
			t.Fatal("a job taken from an empty queue")
		}
	}
	closed := func(c chan struct{}) bool {
		select {
		case _, ok := <-c:
			return !ok
		default:
			return false
		}
	}
	for i, w := range wakes[:maxIdleWorkers] {
		if closed(w) {
			t.Fatalf("worker %d told to exit with %d idle", i, i)
		}
	}
	if !closed(wakes[maxIdleWorkers]) {
		t.Errorf("a worker kept beyond the %d idle allowed", maxIdleWorkers)
	}
	p.close()
	for i, w := range wakes[:maxIdleWorkers] {
		if !closed(w) {
			t.Fatalf("idle worker %d not ended by close", i)
		}
	}
	if w := make(chan struct{}, 1); func() bool { p.take(w); return !closed(w) }() {
		t.Error("a worker kept after close")
	}
}

// Calls are taken oldest first, whichever worker takes them: the queue
// gives them out in the order they were queued, through its wrap-around.
func TestWorkerQueueOldestFirst(t *testing.T) {
	var p workerPool
	wake := make(chan struct{}, 1)
	next := uint64(0)
	for round := range 3 {
		for range 5 {
			p.queue = append(p.queue, job{m: &capserver.Call{CallMsg: capwire.CallMsg{ID: next}}})
			next++
		}
		for want := next - 5; want < next; want++ {
			j, ok := p.take(wake)
			if !ok || j.m.ID != want {
				t.Fatalf("round %d: took %+v, %v; want call %d", round, j.m, ok, want)
			}
		}
		if _, ok := p.take(wake); ok {
			t.Fatalf("round %d: a job taken from an empty queue", round)
		}
		p.idle = p.idle[:0]
	}
}

// A burst of calls read together is answered, each once, with one thread
// running Go code as serve has by default.
func TestBurstAnsweredOnce(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	synctest.Test(t, func(t *testing.T) {
		b, token := bubbleBridge(t, func(*config.Bridge) {})
		client, ended := pipeCall(b, 1000)
		fr := capwire.NewFrameReader(client, 0)
		pipeSend(t, client, &capwire.HelloMsg{V: 1, Token: token})
		if m := pipeRecv(t, fr); m.Type() != "welcome" {
			t.Fatalf("got %#v, want welcome", m)
		}
		const n = 8
		var burst []byte
		for id := range uint64(n) {
			var err error
			// Denied at once: the server never booted.
			if burst, err = capwire.AppendFrame(burst, &capwire.CallMsg{ID: id, Cap: "mcp.t", Op: "echo", Args: []byte{0x80}}, 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := client.Write(burst); err != nil {
			t.Fatal(err)
		}
		seen := map[uint64]bool{}
		for range n {
			d, ok := pipeRecv(t, fr).(*capwire.DeniedMsg)
			if !ok || d.ID >= n || seen[d.ID] {
				t.Fatalf("got %#v after %v", d, seen)
			}
			seen[d.ID] = true
		}
		client.Close()
		<-ended
		if err := b.Shutdown(time.Second); err != nil {
			t.Fatal(err)
		}
	})
}

// goroutines counts the goroutines running a call connection's read loop
// and the bridge's workers, wherever they are parked. Counting every
// goroutine of the process would count those of other tests still
// winding down too.
func goroutines() (readers, workers int) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("bridge.(*callConn).read(")), bytes.Count(buf[:n], []byte("bridge.(*workerPool).work("))
		}
		buf = make([]byte, 2*len(buf))
	}
}

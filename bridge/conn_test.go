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

// A connection with no call in flight holds only its reader: the worker
// that ran a call exits once it is the last to finish, and a call after
// that starts one again.
func TestIdleWorkersRetire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, token := bubbleBridge(t, func(*config.Bridge) {})
		client, ended := pipeCall(b, 1000)
		fr := capwire.NewFrameReader(client, 0)
		pipeSend(t, client, &capwire.HelloMsg{V: 1, Token: token})
		if m := pipeRecv(t, fr); m.Type() != "welcome" {
			t.Fatalf("got %#v, want welcome", m)
		}
		synctest.Wait()
		if n := workers(); n != 1 {
			t.Fatalf("%d workers after the hello, want the reader alone", n)
		}
		for id := range uint64(3) {
			// Denied at once: the server never booted.
			pipeSend(t, client, &capwire.CallMsg{ID: id, Cap: "mcp.t", Op: "echo", Args: []byte{0x80}})
			if d, ok := pipeRecv(t, fr).(*capwire.DeniedMsg); !ok || d.Denial.Code != capwire.CodeServerUnavailable {
				t.Fatalf("got %#v, want server_unavailable", d)
			}
			synctest.Wait()
			if n := workers(); n != 1 {
				t.Errorf("%d workers after call %d, want the reader alone", n, id)
			}
		}
		client.Close()
		<-ended
		if err := b.Shutdown(time.Second); err != nil {
			t.Fatal(err)
		}
	})
}

// workers counts the goroutines running a call connection's worker loop,
// wherever they are parked. Counting every goroutine of the process
// would count those of other tests still winding down too.
func workers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("bridge.(*callConn).work("))
		}
		buf = make([]byte, 2*len(buf))
	}
}

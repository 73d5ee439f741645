package bridge

import (
	"context"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/syncbuf"
	"github.com/rs/zerolog"
)

// With stderr_to_caller on, what a failing server printed reaches the
// program that called it, with every secret out: the values the server
// inherited from capbridge's environment (not only its env table), and
// credentials recognisable by their shape that capbridge never saw.
func TestStderrToCallerRedactsInheritedAndShapes(t *testing.T) {
	defer leakcheck.Check(t)()
	const inherited = "inherited-secret-0123456789"
	t.Setenv("CB_TEST_INHERITED_TOKEN", inherited)
	s := config.NewServer("leaky", "/bin/sh")
	// It reads the first request before it fails, so the failure is its
	// exit (with its stderr), not a write to a pipe it already closed.
	s.Args = []string{"-c", `read -r first; echo "token is $CB_TEST_INHERITED_TOKEN" >&2; ` +
		`echo "using ghp_0123456789abcdefghijABCDEFGHIJ012345 and AKIAIOSFODNN7EXAMPLE" >&2; ` +
		`echo "Authorization: Bearer abcdefghijklmnop0123" >&2; ` +
		`echo "remote https://deploy:hunter2hunter2@git.example.com/repo" >&2; exit 3`}
	s.InheritEnv = append(s.InheritEnv, "CB_TEST_INHERITED_TOKEN")
	s.StderrToCaller = true
	tb := startBridge(t, nil, neverRestart(s))
	c := tb.dial(tb.grant(map[string][]string{"leaky": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	_, err := c.Call(ctx, "leaky", "anything", map[string]any{})
	d := denial(t, err)
	if !strings.Contains(d.Message, "stderr tail") || !strings.Contains(d.Message, "[redacted:CB_TEST_INHERITED_TOKEN]") {
		t.Fatalf("the denial does not show the redacted tail: %s", d.Message)
	}
	for _, secret := range []string{inherited, "ghp_0123456789", "AKIAIOSFODNN7EXAMPLE", "abcdefghijklmnop0123", "hunter2"} {
		if strings.Contains(d.Message, secret) {
			t.Errorf("the caller was shown %q: %s", secret, d.Message)
		}
	}
	c.Close()
	tb.shutdown()
}

// A server's error message is redacted before it is cut to its bound:
// a secret that straddles the cut does not reach the program as a prefix.
func TestServerErrorRedactedBeforeCut(t *testing.T) {
	defer leakcheck.Check(t)()
	const secret = "hunter2-correct-horse-battery-staple-0123456789abcdefghijklmnopqrstuvwxyz"
	s := mcptestServer("t", mcptest.Scenario{})
	s.Env["CB_LEAKY_SECRET"] = secret
	tb := startBridge(t, nil, s)
	c := tb.dial(tb.grant(map[string][]string{"t": nil}))
	ctx, cancel := context.WithTimeout(context.Background(), backstop)
	defer cancel()
	// The secret starts 24 bytes before the message's 1024-byte bound.
	_, err := c.Call(ctx, "t", "rpc_error", map[string]any{"message": strings.Repeat("x", 1000), "env": "CB_LEAKY_SECRET"})
	d := denial(t, err)
	if d.Code != capwire.CodeServerError || !strings.Contains(d.Message, "xxxx") {
		t.Fatalf("the denial: %+v", d)
	}
	if strings.Contains(d.Message, secret[:8]) {
		t.Errorf("the program was shown the start of a secret: …%s", d.Message[max(0, len(d.Message)-80):])
	}
	c.Close()
	tb.shutdown()
}

// What the operator is told of a server's stderr has its secrets out at
// the cuts too: status's tail, a ring that may begin inside a secret, and
// a log line cut short at its logged length, which may end inside one.
func TestStderrCutsRedacted(t *testing.T) {
	defer leakcheck.Check(t)()
	const secret = "S3CR3T-0123456789-abcdefghij-KLMNOPQRSTU"
	s := config.NewServer("edgy", "/bin/sh")
	// A line of 1000 bytes and the secret, cut by the log at 1 KiB; then
	// the secret again, its start pushed out of the 8 KiB ring by what
	// follows.
	s.Args = []string{"-c", `read -r first; { head -c 1000 /dev/zero | tr '\0' x; printf '%s\n' "$SECRET"; printf '%s' "$SECRET"; head -c 8170 /dev/zero | tr '\0' y; } >&2; exit 3`}
	s.Env = map[string]string{"SECRET": secret}
	s.Secrets = map[string]string{"env.SECRET": secret}
	var logs syncbuf.Buffer
	log := zerolog.New(NewSecretWriterOf(&logs, map[string]string{"edgy env.SECRET": secret}))
	tb := startBridgeOpts(t, Options{Log: log, Audit: log}, nil, neverRestart(s))
	st := tb.srv("edgy").status()
	tb.shutdown()
	if !strings.HasPrefix(st.StderrTail, "[redacted:") || strings.Contains(st.StderrTail, secret[len(secret)-8:]) {
		t.Errorf("status's stderr tail starts %q: the end of a secret the ring cut", st.StderrTail[:min(60, len(st.StderrTail))])
	}
	cut := false
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, `"truncated":true`) {
			cut = true
		}
		if strings.Contains(l, secret[:8]) || strings.Contains(l, secret[len(secret)-8:]) {
			t.Errorf("a log line holds part of a secret: %.200s", l)
		}
	}
	if !cut {
		t.Errorf("no stderr line was logged cut short:\n%s", logs.String())
	}
}

// learn adds what changed and keeps what was: the value read at setup,
// which a server may still quote, and the one read since; learning
// nothing new builds no new redactor.
func TestLearnRotatedSecret(t *testing.T) {
	cfg := config.NewServer("web", "")
	cfg.Env = map[string]string{"API_KEY": "setup-value-0123"}
	s := newServer(cfg, zerolog.Nop(), zerolog.Nop(), bootOptions{}, nil)
	if s.redactor() != s.redact {
		t.Fatal("a server that learned nothing has a redactor of its own")
	}
	s.learn(map[string]string{"API_KEY": "setup-value-0123"})
	if s.learned.Load() != nil {
		t.Fatal("learning the setup value changed what is learned")
	}
	s.learn(map[string]string{"API_KEY": "rotated-value-4567", "token_file": "new-file-token-89"})
	r := s.redactor()
	got := r.Text("a setup-value-0123 b rotated-value-4567 c new-file-token-89")
	if want := "a [redacted:API_KEY] b [redacted:API_KEY (rotated)] c [redacted:token_file]"; got != want {
		t.Fatalf("redacted %q, want %q", got, want)
	}
	learned := s.learned.Load()
	s.learn(map[string]string{"API_KEY": "rotated-value-4567"})
	if s.learned.Load() != learned || s.redactor() != r {
		t.Fatal("learning a known value again built a new redactor")
	}
}

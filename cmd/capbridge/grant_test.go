package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/capbridge/capbridge/bridge/control"
)

// recorder is a control plane that records the grant and revoke requests
// it is sent; the other requests are not used here.
type recorder struct {
	control.Handler
	mu      sync.Mutex
	grants  []control.GrantRequest
	revokes []string
}

func (r *recorder) Grant(_ context.Context, req *control.GrantRequest) (*control.Granted, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.grants = append(r.grants, *req)
	return &control.Granted{Token: "cbt1.0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAA", Grant: "0123456789abcdef", ExpiresMS: 1}, nil
}

func (r *recorder) Revoke(_ context.Context, req *control.RevokeRequest) (*control.Revoked, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.revokes = append(r.revokes, req.Grant)
	return &control.Revoked{Found: true}, nil
}

// serveRecorder serves a recorder on a control socket in a fresh
// directory and returns the socket's path.
func serveRecorder(t *testing.T) (*recorder, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "cbg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "control.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	srv := control.Server{Handler: rec}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { srv.ServeConn(ctx, c) })
		}
	})
	t.Cleanup(func() { cancel(); l.Close(); wg.Wait() })
	return rec, path
}

// Every --ttl out of [1s, 24h] is refused before anything is sent, in the
// unit the operator typed; one in range is sent exactly; no --ttl sends
// no ttl_ms, which capbridge reads as its default.
func TestGrantTTL(t *testing.T) {
	rec, sock := serveRecorder(t)
	for _, ttl := range []string{"500us", "0s", "0", "-1s", "999ms", "24h0m0.001s", "25h", "-9223372036854775808ns"} {
		var out, errOut bytes.Buffer
		code := run([]string{"grant", "--control", sock, "--servers", "demo", "--ttl", ttl}, &out, &errOut)
		if code != exitUsage || out.Len() != 0 || !strings.Contains(errOut.String(), "--ttl "+ttl+" is not within [1s, 24h0m0s]") {
			t.Errorf("--ttl %s: exit %d, stdout %q, stderr %q; want a usage error quoting it", ttl, code, out.String(), errOut.String())
		}
	}
	var errOut bytes.Buffer
	if code := run([]string{"grant", "--control", sock, "--servers", "demo", "--ttl", "ten minutes"}, &bytes.Buffer{}, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "not a duration") {
		t.Errorf("--ttl 'ten minutes': exit %d, stderr %q", code, errOut.String())
	}
	if len(rec.grants) != 0 {
		t.Fatalf("refused TTLs reached capbridge: %+v", rec.grants)
	}

	for _, tc := range []struct {
		args []string
		want *uint64
	}{
		{[]string{"--ttl", "1s"}, new(uint64(1000))},
		{[]string{"--ttl", "1.5s"}, new(uint64(1500))},
		{[]string{"--ttl", "24h"}, new(uint64(86_400_000))},
		{nil, nil},
	} {
		var out, errOut bytes.Buffer
		code := run(append([]string{"grant", "--control", sock, "--servers", "demo"}, tc.args...), &out, &errOut)
		if code != exitOK || out.String() != "cbt1.0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAA\n" || !strings.Contains(errOut.String(), "capbridge revoke 0123456789abcdef") {
			t.Fatalf("grant %q: exit %d, stdout %q, stderr %q", tc.args, code, out.String(), errOut.String())
		}
		got := rec.grants[len(rec.grants)-1].TTLMS
		if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
			t.Errorf("grant %q sent ttl_ms %v, want %v", tc.args, deref(got), deref(tc.want))
		}
	}
}

// --peer-uid takes a uid or -1: a value that would wrap to another uid,
// or to (uid_t)-1, is refused, and nothing reaches capbridge.
func TestGrantPeerUID(t *testing.T) {
	rec, sock := serveRecorder(t)
	for _, uid := range []string{"4294968296", "4294967295", "-2", "-4294966296"} {
		var errOut bytes.Buffer
		if code := run([]string{"grant", "--control", sock, "--servers", "demo", "--peer-uid", uid}, &bytes.Buffer{}, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "--peer-uid "+uid+" is not a uid") {
			t.Errorf("--peer-uid %s: exit %d, stderr %q; want a usage error", uid, code, errOut.String())
		}
	}
	if len(rec.grants) != 0 {
		t.Fatalf("refused uids reached capbridge: %+v", rec.grants)
	}
	for uid, want := range map[string]*uint32{"1000": new(uint32(1000)), "0": new(uint32(0)), "4294967294": new(uint32(4294967294)), "-1": nil} {
		if code := run([]string{"grant", "--control", sock, "--servers", "demo", "--peer-uid", uid}, &bytes.Buffer{}, &bytes.Buffer{}); code != exitOK {
			t.Fatalf("--peer-uid %s: exit %d", uid, code)
		}
		got := rec.grants[len(rec.grants)-1].PeerUID
		if (got == nil) != (want == nil) || got != nil && *got != *want {
			t.Errorf("--peer-uid %s sent %v, want %v", uid, got, want)
		}
	}
}

// --resources names the servers whose resources the grant may read.
func TestGrantResources(t *testing.T) {
	rec, sock := serveRecorder(t)
	var out, errOut bytes.Buffer
	if code := run([]string{"grant", "--control", sock, "--servers", "demo,docs", "--resources", "docs"}, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	if g := rec.grants[len(rec.grants)-1]; len(g.Resources) != 1 || g.Resources[0] != "docs" || len(g.Servers) != 2 {
		t.Errorf("sent %+v", g)
	}
}

// --quota sends one quota map per scope, in the units the request
// takes; a mistake is a usage error naming it, and nothing is sent.
func TestGrantQuota(t *testing.T) {
	rec, sock := serveRecorder(t)
	var out, errOut bytes.Buffer
	args := []string{"grant", "--control", sock, "--servers", "gh",
		"--quota", "rate=5,burst=10,calls=1000,bytes_in=1KiB,bytes_out=2MiB,time=90s",
		"--quota", "gh:rate=30/m", "--quota", "gh/a:b:calls=2"}
	if code := run(args, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	want := []control.Quota{
		{Rate: 5, Burst: 10, Calls: 1000, BytesIn: 1024, BytesOut: 2 << 20, TimeMS: 90_000},
		{Scope: "gh", Rate: 0.5},
		{Scope: "gh/a:b", Calls: 2},
	}
	if got := rec.grants[len(rec.grants)-1].Quotas; !reflect.DeepEqual(got, want) {
		t.Errorf("sent %+v, want %+v", got, want)
	}
	n := len(rec.grants)
	for _, tc := range []struct{ quota, want string }{
		{"speed=3", `unknown quota "speed"`},
		{"rate=0", "rate=0: want calls per second"},
		{"rate=5/d", "rate=5/d: want"},
		{"calls=-1", "calls=-1: want"},
		{"bytes_in=lots", "bytes_in=lots: want a byte count"},
		{"time=2d", "time=2d: want a duration"},
		{":calls=1", "the scope before ':' is empty"},
		{"calls", "write KEY=VALUE"},
	} {
		var errOut bytes.Buffer
		code := run([]string{"grant", "--control", sock, "--servers", "gh", "--quota", tc.quota}, &bytes.Buffer{}, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("--quota %s: exit %d, stderr %q; want a usage error with %q", tc.quota, code, errOut.String(), tc.want)
		}
	}
	var dup bytes.Buffer
	if code := run([]string{"grant", "--control", sock, "--servers", "gh", "--quota", "gh:calls=1", "--quota", "gh:rate=1"}, &bytes.Buffer{}, &dup); code != exitUsage || !strings.Contains(dup.String(), "given twice") {
		t.Errorf("a scope twice: exit %d, stderr %q", code, dup.String())
	}
	if len(rec.grants) != n {
		t.Fatalf("refused quotas reached capbridge: %+v", rec.grants[n:])
	}
}

func deref(p *uint64) any {
	if p == nil {
		return "(left out)"
	}
	return *p
}

// revoke takes a grant id as its argument, or a token on stdin (with -
// or no argument), so the secret need never be in argv.
func TestRevokeReadsStdin(t *testing.T) {
	rec, sock := serveRecorder(t)
	defer func(r io.Reader) { stdin = r }(stdin)
	const token = "cbt1.0123456789abcdef.AAAAAAAAAAAAAAAAAAAAAA"
	for _, tc := range []struct {
		args  []string
		input string
		want  string
		warns bool
	}{
		{[]string{"0123456789abcdef"}, "", "0123456789abcdef", false},
		{[]string{"-"}, token + "\n", token, false},
		{nil, "  " + token + "\n", token, false},
		{nil, "0123456789abcdef", "0123456789abcdef", false},
		{[]string{token}, "", token, true},
	} {
		stdin = strings.NewReader(tc.input)
		var out, errOut bytes.Buffer
		code := run(append([]string{"revoke", "--control", sock}, tc.args...), &out, &errOut)
		if code != exitOK || out.String() != "revoked\n" || rec.revokes[len(rec.revokes)-1] != tc.want {
			t.Fatalf("revoke %q <%q: exit %d, stdout %q, stderr %q, sent %q", tc.args, tc.input, code, out.String(), errOut.String(), rec.revokes)
		}
		if warned := strings.Contains(errOut.String(), "visible to every user"); warned != tc.warns {
			t.Errorf("revoke %q: stderr %q; want a warning about argv: %v", tc.args, errOut.String(), tc.warns)
		}
	}
	n := len(rec.revokes)
	for _, input := range []string{"", "\n", "a b", strings.Repeat("x", maxTokenInput+1)} {
		stdin = strings.NewReader(input)
		var errOut bytes.Buffer
		if code := run([]string{"revoke", "--control", sock}, &bytes.Buffer{}, &errOut); code != exitUsage {
			t.Errorf("revoke <%.20q: exit %d, stderr %q; want a usage error", input, code, errOut.String())
		}
	}
	if code := run([]string{"revoke", "--control", sock, "a", "b"}, &bytes.Buffer{}, &bytes.Buffer{}); code != exitUsage {
		t.Errorf("revoke a b: exit %d", code)
	}
	if len(rec.revokes) != n {
		t.Errorf("refused revokes reached capbridge: %q", rec.revokes[n:])
	}
}

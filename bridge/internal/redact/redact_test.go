package redact

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRedactor(t *testing.T) {
	r := New(map[string]string{
		"TOKEN": "abcd1234", "LONG": "xxabcd1234yy", "TINY": "ab", "EMPTY": "", "PEM": "-----BEGIN KEY-----\nMIIB\n-----END KEY-----",
	})
	for _, tc := range []struct{ in, want string }{
		{"token abcd1234 and xxabcd1234yy", "token [redacted:TOKEN] and [redacted:LONG]"},
		{"ab stays: TINY is too short", "ab stays: TINY is too short"},
		{"key:\n-----BEGIN KEY-----\nMIIB\n-----END KEY-----\ndone", "key:\n[redacted:PEM]\ndone"},
		{"a line: MIIB", "a line: [redacted:PEM]"},
	} {
		if got := r.Text(tc.in); got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// A tail may start after a secret's first bytes (the ring) and end
	// before its last (a server that died mid-write); at least 4 bytes
	// of it are enough to be redacted.
	for _, tc := range []struct{ in, want string }{
		{"d1234 then the rest", "[redacted:TOKEN] then the rest"},
		{"1234yy then abcd123", "[redacted:LONG] then [redacted:TOKEN]"},
		{"234 is too little to tell", "234 is too little to tell"},
		{"MIIB\n-----END KEY-----\nafter", "[redacted:PEM]\n[redacted:PEM]\nafter"}, // each line of a key is a secret too
		{"\x80\x80bad start \xff", "bad start \uFFFD"},
	} {
		if got := r.Tail([]byte(tc.in)); got != tc.want {
			t.Errorf("Tail(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// The cap holds after redaction, and the cut never splits a
	// character.
	long := strings.Repeat("é", 3000) + " abcd1234"
	got := r.Tail([]byte(long))
	if len(got) > MaxTail || !strings.HasPrefix(got, "…é") || !strings.HasSuffix(got, " [redacted:TOKEN]") {
		t.Errorf("tail of %d bytes = %d bytes %.12q…%q", len(long), len(got), got, got[max(0, len(got)-20):])
	}
	// Ring is the operator's view of the same ring: the edges and whole
	// values replaced, shapes left; CutEnd replaces only a start at the
	// end, for a line that begins where a line begins.
	if got := r.Ring("d1234 then Bearer abcdefghijkl and abcd12"); got != "[redacted:TOKEN] then Bearer abcdefghijkl and [redacted:TOKEN]" {
		t.Errorf("Ring = %q", got)
	}
	if got := r.CutEnd("1234 stays at the start; the end abcd12"); got != "1234 stays at the start; the end [redacted:TOKEN]" {
		t.Errorf("CutEnd = %q", got)
	}
	if got := New(nil).Tail([]byte("  plain\n")); got != "plain" {
		t.Errorf("tail without secrets = %q", got)
	}
}

// Cut redacts before it cuts: a secret or a credential shape that
// straddles the cut leaves no part of itself in front of it, and a huge
// message is cut to the same bound.
func TestCut(t *testing.T) {
	const secret = "hunter2-correct-horse-battery-staple"
	r := New(map[string]string{"PASS": secret})
	for _, tc := range []struct {
		name, in string
	}{
		{"secret across the cut", strings.Repeat("x", 90) + secret + " is wrong"},
		{"shape across the cut", strings.Repeat("x", 90) + " Authorization: Bearer abcdefghijklmnopqrstuvwxyz"},
		{"secret far beyond", strings.Repeat("y", 1<<20) + secret},
	} {
		got := r.Cut(tc.in, 100)
		if len(got) > 100+len("…") {
			t.Errorf("%s: %d bytes, over the bound", tc.name, len(got))
		}
		for _, part := range []string{secret[:minRedacted], "abcd"} {
			if strings.Contains(got, part) {
				t.Errorf("%s: %q holds %q", tc.name, got, part)
			}
		}
	}
	if got := r.Cut("short "+secret, 100); got != "short [redacted:PASS]" {
		t.Errorf("a short message: %q", got)
	}
}

// overlap finds the longest suffix of a that is a prefix of b.
func TestOverlap(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"xxabcd", "abcdyy", 4},
		{"abcabcab", "abcabcabz", 8},
		{"aaaaa", "aaaab", 4},
		{"abc", "abcd", 0},
		{"zzzz", "yyyy", 0},
		{"", "", 0},
	} {
		if got := overlap(tc.a, tc.b); got != tc.want {
			t.Errorf("overlap(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// Credentials recognised by their shape are redacted though capbridge
// never saw their values, in messages and in tails, whole or cut short
// by a server that died mid-write; ordinary text is left alone.
func TestRedactShapes(t *testing.T) {
	r := New(nil)
	for _, tc := range []struct{ in, want string }{
		{"Authorization: Bearer eyJhbGciOi.payload.sig-12345", "Authorization: Bearer [redacted:authorization]"},
		{"using key sk-ant-api03-abcdefghijklmnopqrstuv", "using key [redacted:api-key]"},
		{"sk-proj-ABCDEFGHIJKLMNOPqrstuvwx1234", "[redacted:api-key]"},
		{"GITHUB_TOKEN ghp_0123456789abcdefghijABCDEFGHIJ012345 rejected", "GITHUB_TOKEN [redacted:github] rejected"},
		{"github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "[redacted:github]"},
		{"aws AKIAIOSFODNN7EXAMPLE denied", "aws [redacted:aws] denied"},
		{"clone https://x-access-token:s3cr3tT0k3n@github.com/a/b failed", "clone https://[redacted:url-userinfo]github.com/a/b failed"},
		{"postgres://admin:hunter2@db:5432/app", "postgres://[redacted:url-userinfo]db:5432/app"},
		{"slack xoxb-123456789012-abcdefghij", "slack [redacted:api-key]"},
		{"config: password=hunter2hunter2 retry", "config: password=[redacted:secret] retry"},
		{`{"api_key": "abcdef123456"}`, `{"api_key": "[redacted:secret]"}`},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nafter", "[redacted:private-key]\nafter"},
		{"jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpM", "jwt [redacted:jwt]"},
		{"file not found: /srv/data/a.txt (see https://example.com/docs)", "file not found: /srv/data/a.txt (see https://example.com/docs)"},
		{"skip-tests is not a key", "skip-tests is not a key"},
	} {
		if got := r.Text(tc.in); got != tc.want {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"fatal: auth failed for ghp_0123456", "fatal: auth failed for [redacted:cut]"},
		{"sending Authorization: Bearer abc", "sending Authorization: [redacted:cut]"},
		{"key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA", "key:\n[redacted:private-key]"},
	} {
		if got := r.Tail([]byte(tc.in)); got != tc.want {
			t.Errorf("Tail(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// A tail longer than shown loses its first, possibly cut, line.
	long := "p_0123456789abcdefghijABCDEF is the rest of a token\n" + strings.Repeat("x", MaxTail) + "\nend"
	if got := r.Tail([]byte(long)); strings.Contains(got, "0123456789abcdef") {
		t.Errorf("the cut first line of a long tail survived: %.60q", got)
	}
}

// Whatever a server prints, its tail is valid UTF-8 within MaxTail, and
// holds no secret of its env whole.
func FuzzTail(f *testing.F) {
	for _, s := range []string{"token abcd1234", "ghp_0123456789abcdefghijABCDEF", "\xff\xfe", "d1234 x abcd12", "Bearer " + strings.Repeat("a", 3000)} {
		f.Add([]byte(s))
	}
	r := New(map[string]string{"TOKEN": "abcd1234", "KEY": "s3cr3t-value"})
	f.Fuzz(func(t *testing.T, b []byte) {
		got := r.Tail(b)
		if !utf8.ValidString(got) || len(got) > MaxTail {
			t.Fatalf("Tail = %d bytes, valid %v", len(got), utf8.ValidString(got))
		}
		for _, secret := range []string{"abcd1234", "s3cr3t-value"} {
			if strings.Contains(got, secret) {
				t.Fatalf("Tail(%q) = %q holds %q", b, got, secret)
			}
		}
	})
}

// The Writer replaces each secret, raw and as JSON escapes it, longest
// first, and each line of one of several lines; it can be given new
// secrets while in use.
func TestWriter(t *testing.T) {
	var out strings.Builder
	w := NewWriter(&out, map[string]string{"env.A": `ab"c\d`, "env.B": "tok-1234", "env.C": "tok-12345", "short": "xyz"})
	line := `{"msg":"saw ab\"c\\d and tok-12345 and tok-1234 and xyz"}` + "\n"
	if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	want := `{"msg":"saw [redacted:env.A] and [redacted:env.C] and [redacted:env.B] and xyz"}` + "\n"
	if out.String() != want {
		t.Fatalf("wrote %q, want %q", out.String(), want)
	}
	// A value of several lines is redacted line by line too: a server
	// prints it a line at a time, and each is logged on its own.
	out.Reset()
	pem := "-----BEGIN PRIVATE KEY-----\r\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\r\nBKcwggSjAgEAAoIBAQC7\r\n-----END PRIVATE KEY-----\r\n"
	w.Set(map[string]string{"key": pem})
	for l := range strings.Lines(pem) {
		fmt.Fprintf(w, `{"stderr":%q}`+"\n", strings.TrimRight(l, "\r\n"))
	}
	if strings.Contains(out.String(), "MIIEvQ") || strings.Contains(out.String(), "BKcwgg") || strings.Count(out.String(), "[redacted:key]") != 4 {
		t.Errorf("a key printed a line at a time:\n%s", out.String())
	}
	out.Reset()
	w.Set(nil)
	fmt.Fprint(w, "tok-1234")
	if out.String() != "tok-1234" {
		t.Fatalf("after Set(nil): %q", out.String())
	}
}

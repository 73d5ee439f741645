package redact

import (
	"strings"
	"testing"
)

func TestRedactor(t *testing.T) {
	r := New(map[string]string{
		"TOKEN": "abcd1234", "LONG": "xxabcd1234yy", "TINY": "ab", "EMPTY": "", "PEM": "-----BEGIN KEY-----\nMIIB\n-----END KEY-----",
	})
	for _, tc := range []struct{ in, want string }{
		{"token abcd1234 and xxabcd1234yy", "token [redacted:TOKEN] and [redacted:LONG]"},
		{"ab stays: TINY is too short", "ab stays: TINY is too short"},
		{"key:\n-----BEGIN KEY-----\nMIIB\n-----END KEY-----\ndone", "key:\n[redacted:PEM]\ndone"},
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
		{"MIIB\n-----END KEY-----\nafter", "[redacted:PEM]\nafter"},
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
	if got := New(nil).Tail([]byte("  plain\n")); got != "plain" {
		t.Errorf("tail without secrets = %q", got)
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

package truncate

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 3, "hel"},
		{"hello", 0, ""},
		{"hello", -1, ""},
		{"héllo", 2, "h"}, // é is two bytes: never split
		{"héllo", 3, "hé"},
		{"日本", 4, "日"},
		{"日本", 2, ""},
	} {
		if got := String(tc.s, tc.n); got != tc.want {
			t.Errorf("String(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if got := String([]byte(tc.s), tc.n); string(got) != tc.want {
			t.Errorf("String([]byte(%q), %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestSuffix(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 10, "abc"},
		{"abcdef", 3, "def"},
		{"a日本", 4, "本"},          // the cut splits 日: its continuation bytes go
		{"\x80\x80ok", -1, "ok"}, // a ring that starts mid-character
		{"ok\xffok", -1, "ok\xffok"},
		{"", 5, ""},
	} {
		if got := Suffix(tc.s, tc.n); got != tc.want {
			t.Errorf("Suffix(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

func TestEllipsis(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"héllo", 2, "h…"},
		{"hi", 2, "hi"},
		{"", 0, ""},
		{"ab\xffcd", 3, "ab…"}, // the U+FFFD standing for \xff is 3 bytes: it does not fit after "ab"
		{"ab\xff", 10, "ab\uFFFD"},
		// A key of 63 bytes and "é" cut at 64 once split the "é".
		{strings.Repeat("a", 63) + "é", 64, strings.Repeat("a", 63) + "…"},
	} {
		got := Ellipsis(tc.s, tc.n)
		if got != tc.want {
			t.Errorf("Ellipsis(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Ellipsis(%q, %d) = %q is not valid UTF-8", tc.s, tc.n, got)
		}
	}
}

func TestTail(t *testing.T) {
	for _, tc := range []struct {
		b    string
		n    int
		want string
	}{
		{"abc", 10, "abc"},
		{"abcdef", 3, "def"},
		{"a日本", 4, "本"},
		{"\x80\x80ok", -1, "ok"},
		{"ok\xffok", -1, "ok\uFFFDok"},
		{"", 5, ""},
		{"plain\n", -1, "plain\n"},
		{"\xa9 split rune first", -1, " split rune first"},
		{"\x80\x80\x80\x80\x80x", -1, "\uFFFDx"}, // at most 3 bytes are a split character's
		{"latin-1 caf\xe9", -1, "latin-1 caf\uFFFD"},
	} {
		if got := Tail([]byte(tc.b), tc.n); got != tc.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tc.b, tc.n, got, tc.want)
		}
	}
}

// Every cut of every string is valid UTF-8 when the string was, and never
// longer than asked.
func FuzzCuts(f *testing.F) {
	for _, s := range []string{"héllo", "日本語", strings.Repeat("a", 63) + "é", "\xff\x80é"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		valid := utf8.ValidString(s)
		if p := String(s, n); len(p) > max(n, 0) || !strings.HasPrefix(s, p) || (valid && !utf8.ValidString(p)) {
			t.Fatalf("String(%q, %d) = %q", s, n, p)
		}
		if p := Suffix(s, n); (n >= 0 && len(p) > n) || !strings.HasSuffix(s, p) || (valid && !utf8.ValidString(p)) {
			t.Fatalf("Suffix(%q, %d) = %q", s, n, p)
		}
		if e := Ellipsis(s, n); !utf8.ValidString(e) || len(e) > max(n, 0)+len("…") {
			t.Fatalf("Ellipsis(%q, %d) = %q", s, n, e)
		}
		if tl := Tail([]byte(s), n); !utf8.ValidString(tl) {
			t.Fatalf("Tail(%q, %d) = %q", s, n, tl)
		}
	})
}

package pointer

import (
	"strings"
	"testing"
)

func TestToken(t *testing.T) {
	for _, tc := range []struct{ raw, esc string }{
		{"a", "a"}, {"a/b", "a~1b"}, {"m~n", "m~0n"}, {"~/", "~0~1"}, {"~1", "~01"}, {"", ""},
	} {
		if got := Token(tc.raw); got != tc.esc {
			t.Errorf("Token(%q) = %q, want %q", tc.raw, got, tc.esc)
		}
		if got := Unescape(tc.esc); got != tc.raw {
			t.Errorf("Unescape(%q) = %q, want %q", tc.esc, got, tc.raw)
		}
		if got := string(AppendToken([]byte("/x"), tc.raw)); got != "/x/"+tc.esc {
			t.Errorf("AppendToken(%q) = %q", tc.raw, got)
		}
	}
}

func TestTokens(t *testing.T) {
	for _, tc := range []struct{ p, want string }{
		{"/a~1b/c~0d/~01", "a/b|c~d|~1"},
		{"/a", "a"},
		{"/a/", "a|"},
		{"/", ""},
	} {
		if got := strings.Join(Tokens(tc.p), "|"); got != tc.want {
			t.Errorf("Tokens(%q) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

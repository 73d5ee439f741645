package text

import "testing"

func TestClip(t *testing.T) {
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
		if got := Clip(tc.s, tc.n); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
	if got := Ellipsis("héllo", 2); got != "h…" {
		t.Errorf("Ellipsis = %q", got)
	}
	if got := Ellipsis("hi", 2); got != "hi" {
		t.Errorf("Ellipsis of a short string = %q", got)
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
		{"a日本", 4, "本"},          // the cut splits 日: its continuation bytes go
		{"\x80\x80ok", -1, "ok"}, // a ring that starts mid-character
		{"ok\xffok", -1, "ok\uFFFDok"},
		{"", 5, ""},
	} {
		if got := Tail([]byte(tc.b), tc.n); got != tc.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tc.b, tc.n, got, tc.want)
		}
	}
}

func TestPointerToken(t *testing.T) {
	for _, tc := range []struct{ raw, esc string }{
		{"a", "a"}, {"a/b", "a~1b"}, {"m~n", "m~0n"}, {"~/", "~0~1"}, {"~1", "~01"}, {"", ""},
	} {
		if got := PointerToken(tc.raw); got != tc.esc {
			t.Errorf("PointerToken(%q) = %q, want %q", tc.raw, got, tc.esc)
		}
		if got := UnescapePointerToken(tc.esc); got != tc.raw {
			t.Errorf("UnescapePointerToken(%q) = %q, want %q", tc.esc, got, tc.raw)
		}
		if got := string(AppendPointerToken([]byte("/x"), tc.raw)); got != "/x/"+tc.esc {
			t.Errorf("AppendPointerToken(%q) = %q", tc.raw, got)
		}
	}
}

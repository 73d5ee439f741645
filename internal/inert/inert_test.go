package inert

import "testing"

func TestInert(t *testing.T) {
	const hostile = "a\x1b]0;T\x07b\nc\u009b2J\u202ed\te\xff"
	for _, tc := range []struct {
		name     string
		f        func(string) string
		in, want string
	}{
		{"Line", Line, hostile, "a\ufffd]0;T\ufffdb\ufffdc\ufffd2J\ufffdd\ufffde\ufffd"},
		{"Lines", Lines, hostile, "a\ufffd]0;T\ufffdb\nc\ufffd2J\ufffdd\ufffde\ufffd"},
		{"Line, plain text", Line, "café — 日本", "café — 日本"},
	} {
		if got := tc.f(tc.in); got != tc.want {
			t.Errorf("%s(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

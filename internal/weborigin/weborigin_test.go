package weborigin

import (
	"net/url"
	"testing"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"http://a.test/x", "http://a.test:80/y", true},
		{"https://a.test/x", "https://A.Test:443/y", true},
		{"HTTP://a.test/x", "http://a.test/", true},
		{"http://a.test/x", "https://a.test/x", false},
		{"http://a.test/x", "http://a.test:8080/x", false},
		{"http://a.test/x", "http://b.test/x", false},
		{"http://a.test/x", "http://a.test@b.test/x", false},
		{"http://[::1]:80/x", "http://[::1]/x", true},
		{"https://a.test:443/x", "http://a.test:443/x", false},
	} {
		a, errA := url.Parse(tc.a)
		b, errB := url.Parse(tc.b)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if got := Of(a) == Of(b); got != tc.same {
			t.Errorf("%s and %s: same origin %v, want %v (%s, %s)", tc.a, tc.b, got, tc.same, Of(a), Of(b))
		}
	}
}

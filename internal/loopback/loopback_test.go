package loopback

import "testing"

func TestHost(t *testing.T) {
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"LocalHost", true},
		{"127.0.0.1", true},
		{"127.1.2.3", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		{"::1%lo", true},
		{"", false},
		{"localhost.", false},
		{"localhost.example.com", false},
		{"127.0.0.1.nip.io", false},
		{"[::1]", false}, // brackets are the URL's, not the host's
		{"127.0.0.1:80", false},
		{"0.0.0.0", false},
		{"::", false},
		{"10.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"example.com", false},
		{"2130706433", false}, // 127.0.0.1 as one number: not an address here
		{"0x7f.1", false},
	} {
		if got := Host(tc.host); got != tc.want {
			t.Errorf("Host(%q) = %v, want %v", tc.host, got, tc.want)
		}
	}
}

func TestHostPort(t *testing.T) {
	for _, tc := range []struct {
		hostport string
		want     bool
	}{
		{"localhost", true},
		{"localhost:8080", true},
		{"127.0.0.1:1", true},
		{"[::1]:8080", true},
		{"[::1]", true},
		{"::1", true},
		{"[::1", false},
		{"example.com:8080", false},
		{"[::1]x", false},
		{"127.0.0.1.evil:80", false},
		{"", false},
	} {
		if got := HostPort(tc.hostport); got != tc.want {
			t.Errorf("HostPort(%q) = %v, want %v", tc.hostport, got, tc.want)
		}
	}
}

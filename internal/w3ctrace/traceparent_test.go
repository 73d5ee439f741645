package w3ctrace

import "testing"

func TestShape(t *testing.T) {
	for _, tc := range []struct {
		tp   string
		want bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"01-00000000000000000000000000000000-0000000000000000-00", true}, // version and zeros are the caller's
		{"", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0", false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", false},
		{`00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"}`, false},
	} {
		if got := Shape(tc.tp); got != tc.want {
			t.Errorf("Shape(%q) = %v, want %v", tc.tp, got, tc.want)
		}
	}
}

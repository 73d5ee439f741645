package jsonlex

import (
	"strings"
	"testing"
	"unsafe"
)

// scannedString returns the Value of a JSON string of n bytes, text and
// quotes included, as ScanObject yields it from a line.
func scannedString(t *testing.T, n int) Value {
	t.Helper()
	line := []byte(`{"a":"` + strings.Repeat("x", n-2) + `"}`)
	var v Value
	if _, f := ScanObject(line, 0, 0, CheckUTF8, func(_ []byte, mv Value, _ int) bool {
		v = mv
		return true
	}); f != nil {
		t.Fatal(f)
	}
	return v
}

func TestLeaseClass(t *testing.T) {
	for _, tc := range []struct{ n, class int }{
		{0, -1}, {1, -1}, {1<<10 - 1, -1},
		{1 << 10, 0}, {1<<10 + 1, 1}, {2 << 10, 1}, {16 << 10, 4}, {16<<10 + 1, 5},
		{64 << 10, 6}, {64<<10 + 1, -1}, {1 << 30, -1},
	} {
		if got := leaseClass(tc.n); got != tc.class {
			t.Errorf("leaseClass(%d) = %d, want %d", tc.n, got, tc.class)
		}
	}
}

// TestLease: a value worth a lease is copied into pooled memory of its
// class, shares its text as an owned Value does, and is zeroed when it
// is given back, so a string kept too long reads zeros, not whatever the
// memory holds next; a value too small or too large is owned, and its
// Release changes nothing.
func TestLease(t *testing.T) {
	for _, tc := range []struct {
		n      int
		leased bool
	}{{64, false}, {1<<10 - 1, false}, {1 << 10, true}, {16 << 10, true}, {64 << 10, true}, {64<<10 + 1, false}} {
		v := scannedString(t, tc.n)
		l := v.Lease()
		if l.Leased() != tc.leased || !l.Owned() || string(l.Bytes()) != string(v.Bytes()) {
			t.Fatalf("%d bytes: Lease leased %v owned %v, equal %v", tc.n, l.Leased(), l.Owned(), string(l.Bytes()) == string(v.Bytes()))
		}
		if &l.Bytes()[0] == &v.Bytes()[0] {
			t.Fatalf("%d bytes: Lease did not copy", tc.n)
		}
		body := l.Str(l.Bytes()[1 : tc.n-1])
		if unsafe.StringData(body) != &l.Bytes()[1] {
			t.Errorf("%d bytes: Str of a part is not shared", tc.n)
		}
		l.Release()
		want := strings.Repeat("x", tc.n-2)
		if tc.leased {
			want = strings.Repeat("\x00", tc.n-2)
		}
		if body != want {
			t.Errorf("%d bytes: after Release the text reads %.8q…, want %.8q…", tc.n, body, want)
		}
	}
	var zero Value
	if zero.Lease().Leased() || !zero.Lease().IsZero() {
		t.Error("the zero Value leased")
	}
	zero.Release()
}

// TestLeaseReuses: memory given back is what the next lease of its class
// takes, so leasing in a loop allocates nothing.
func TestLeaseReuses(t *testing.T) {
	v := scannedString(t, 16<<10)
	v.Lease().Release()
	allocs := testing.AllocsPerRun(100, func() {
		l := v.Lease()
		if !l.Leased() || len(l.Bytes()) != 16<<10 {
			t.Fatal("not leased")
		}
		l.Release()
	})
	// The race detector's pool drops a quarter of what it is given, so
	// one lease in four may allocate: still less than one per run.
	if allocs != 0 {
		t.Errorf("%v allocations per lease", allocs)
	}
}

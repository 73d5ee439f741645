package confwatch

import (
	"context"
	"io/fs"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/fakeclock"
)

// files is an in-memory file system whose contents the test changes.
type files struct {
	mu sync.Mutex
	m  map[string]string
}

func (f *files) set(path, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[path] = text
}

func (f *files) remove(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, path)
}

func (f *files) read(path string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	text, ok := f.m[path]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return []byte(text), nil
}

// watching runs Watch over fs's a.toml and b.lock in a synctest bubble,
// from loaded (Options.Loaded), and returns how many changes it has
// reported so far (read once the bubble is idle) and a stop.
func watching(t *testing.T, f *files, loaded map[string][]byte) (count func() int, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var mu sync.Mutex
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(ctx, Options{Paths: []string{"a.toml", "b.lock"}, Every: 100 * time.Millisecond, Quiet: time.Second, Read: f.read, Loaded: loaded}, func() {
			mu.Lock()
			n++
			mu.Unlock()
		})
	}()
	count = func() int {
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		return n
	}
	return count, func() { cancel(); <-done }
}

// A change is reported once it has held for Quiet, once; a burst of
// writes within Quiet is one change; writing back what was reported is
// no change; a file that cannot be read holds a change back until it
// can; cancelling the context ends Watch.
func TestWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &files{m: map[string]string{"a.toml": "one", "b.lock": "lock"}}
		count, stop := watching(t, f, nil)
		defer stop()

		fakeclock.Advance(5 * time.Second)
		if n := count(); n != 0 {
			t.Fatalf("%d changes reported with no change", n)
		}

		f.set("a.toml", "two")
		fakeclock.Advance(900 * time.Millisecond)
		if n := count(); n != 0 {
			t.Fatalf("reported before the change held for Quiet: %d", n)
		}
		fakeclock.Advance(400 * time.Millisecond)
		if n := count(); n != 1 {
			t.Fatalf("%d changes reported once it held, want 1", n)
		}
		fakeclock.Advance(5 * time.Second)
		if n := count(); n != 1 {
			t.Fatalf("%d changes reported for one change, want 1", n)
		}

		// A burst: a write every 500 ms for 3 s, each within Quiet of the
		// last, is one change, reported once the last has held.
		for i := range 6 {
			f.set("b.lock", "lock "+string(rune('a'+i)))
			fakeclock.Advance(500 * time.Millisecond)
		}
		if n := count(); n != 1 {
			t.Fatalf("reported during a burst: %d", n)
		}
		fakeclock.Advance(time.Second)
		if n := count(); n != 2 {
			t.Fatalf("%d changes after a burst, want 2", n)
		}

		// Changed and changed back within Quiet: nothing to report.
		f.set("a.toml", "three")
		fakeclock.Advance(300 * time.Millisecond)
		f.set("a.toml", "two")
		fakeclock.Advance(5 * time.Second)
		if n := count(); n != 2 {
			t.Fatalf("a change undone within Quiet was reported: %d", n)
		}

		// Removed, then written anew: reported once readable and held.
		f.remove("a.toml")
		fakeclock.Advance(5 * time.Second)
		if n := count(); n != 2 {
			t.Fatalf("an unreadable file was reported as a change: %d", n)
		}
		f.set("a.toml", "four")
		fakeclock.Advance(1500 * time.Millisecond)
		if n := count(); n != 3 {
			t.Fatalf("%d changes once the file came back, want 3", n)
		}
	})
}

// A change is measured from Loaded, what serve loaded, when it is given:
// files that differ from it when Watch starts (saved while serve booted)
// are a change, reported once it has held; files that match it are none;
// a file Loaded lacks is a change once it can be read.
func TestWatchFromLoaded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		loaded map[string][]byte
		want   int
	}{
		{"saved since loaded", map[string][]byte{"a.toml": []byte("one"), "b.lock": []byte("lock")}, 1},
		{"as loaded", map[string][]byte{"a.toml": []byte("two"), "b.lock": []byte("lock")}, 0},
		{"unreadable when loaded", map[string][]byte{"a.toml": []byte("two")}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &files{m: map[string]string{"a.toml": "two", "b.lock": "lock"}}
				count, stop := watching(t, f, tc.loaded)
				defer stop()
				fakeclock.Advance(900 * time.Millisecond)
				if n := count(); n != 0 {
					t.Fatalf("reported before the change held for Quiet: %d", n)
				}
				fakeclock.Advance(5 * time.Second)
				if n := count(); n != tc.want {
					t.Fatalf("%d changes reported, want %d", n, tc.want)
				}
			})
		})
	}
}

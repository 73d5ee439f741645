// Package confwatch implements serve --watch: it notices that the
// contents of configuration files changed and, once they have stayed the
// same for a quiet period, says so once.
package confwatch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"time"
)

// Defaults of Options.
const (
	// DefaultEvery is how often the files are read: a person saving a
	// file sees it applied within about Every plus Quiet.
	DefaultEvery = 500 * time.Millisecond
	// DefaultQuiet is how long the contents must stay the same before a
	// change counts: an editor's save in several writes, or a deploy
	// tool's copy of several files, is applied once, whole.
	DefaultQuiet = time.Second
)

// Options says what Watch watches and how.
type Options struct {
	// Paths are the files watched; each is read by name every time, so
	// an editor's rename over the file and a Kubernetes ConfigMap's
	// symlink swap are seen like a write in place.
	Paths []string
	// Every is how often they are read (DefaultEvery when zero).
	Every time.Duration
	// Quiet is how long a change must hold (DefaultQuiet when zero).
	Quiet time.Duration
	// Read reads one file, within a bound: serve gives the reader it
	// loads its config with, the tests an in-memory one.
	Read func(path string) ([]byte, error)
	// Loaded, when not nil, is what each path held when serve loaded
	// it, the contents a change is measured from. Serve loads long
	// before it can watch (its servers boot in between, for up to their
	// startup timeout): a save in between would otherwise be taken for
	// the starting point and never applied. A path Loaded lacks (it
	// could not be read then) counts as changed once it can be read.
	// When nil, the contents Watch reads when called are the start.
	Loaded map[string][]byte
}

// Watch calls changed each time the files' contents differ from those
// it last reported (at first, Loaded, or those it read when called) and
// have stayed so for Quiet. While a file cannot be read (an editor
// between removing and writing it) nothing is reported: the change
// counts once it can be read again. Watch returns when ctx is done;
// changed runs on its goroutine, so a slow reload delays the next look,
// never overlaps it.
func Watch(ctx context.Context, o Options, changed func()) {
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.Quiet <= 0 {
		o.Quiet = DefaultQuiet
	}
	var reported []byte // nil, which no digest equals, when unknown
	if o.Loaded != nil {
		reported, _ = digest(o.Paths, func(path string) ([]byte, error) {
			data, ok := o.Loaded[path]
			if !ok {
				return nil, fs.ErrNotExist
			}
			return data, nil
		})
	} else {
		reported, _ = digest(o.Paths, o.Read)
	}
	var pending []byte
	var since time.Time
	tick := time.NewTicker(o.Every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		d, ok := digest(o.Paths, o.Read)
		switch {
		case !ok:
			// Unreadable: looked at again on the next tick.
		case bytes.Equal(d, reported):
			pending = nil
		case !bytes.Equal(d, pending):
			pending, since = d, time.Now()
		case time.Since(since) >= o.Quiet:
			reported, pending = d, nil
			changed()
		}
	}
}

// digest is a hash of every file's name and contents, as read reads
// them; ok is false when one cannot be read.
func digest(paths []string, read func(string) ([]byte, error)) (d []byte, ok bool) {
	h := sha256.New()
	for _, p := range paths {
		data, err := read(p)
		if err != nil {
			return nil, false
		}
		fmt.Fprintf(h, "%d:%s%d:", len(p), p, len(data))
		h.Write(data)
	}
	return h.Sum(nil), true
}

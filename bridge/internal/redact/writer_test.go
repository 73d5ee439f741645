package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/capbridge/capbridge/bridge/internal/auditlog"
)

// fullDisk takes room bytes of what is written to it and refuses the
// rest, as a file on a disk that fills does; with err nil it breaks
// io.Writer's contract instead, reporting a short write without an error.
type fullDisk struct {
	got  []byte
	room int
	err  error
}

func (d *fullDisk) Write(p []byte) (int, error) {
	n := min(len(p), d.room)
	d.got = append(d.got, p[:n]...)
	d.room -= n
	if n < len(p) {
		return n, d.err
	}
	return n, nil
}

// A write the disk cuts reports how much of p reached it: up to the end
// of the last part of p (a byte, or a secret) whose redacted form began
// to, so that a secret whose marker was cut counts as written. n is
// then above 0 once anything was written, and p[n-1] is a newline just
// when the file ends with one. It used to report 0 whatever was written.
func TestWriterShortWrite(t *testing.T) {
	secrets := map[string]string{"env.T": "tok-secret", "env.A": "tok-1234", "env.B": "tok-12345", "env.Q": `ab"cd1`}
	for _, tc := range []struct {
		name string
		p    string
		room int   // of the redacted text
		want int   // of p
		err  error // the disk's; nil: a short write without one
	}{
		{"nothing written", "a tok-secret b\n", 0, 0, syscall.ENOSPC},
		{"cut in the text", "a tok-secret b\n", 1, 1, syscall.ENOSPC},
		{"cut before a marker", "a tok-secret b\n", 2, 2, syscall.ENOSPC},
		{"cut at a marker's first byte", "a tok-secret b\n", 3, 12, syscall.ENOSPC},
		{"cut at a marker's last byte", "a tok-secret b\n", 17, 12, syscall.ENOSPC},
		{"cut after a marker", "a tok-secret b\n", 18, 12, syscall.ENOSPC},
		{"cut before the newline", "a tok-secret b\n", 20, 14, syscall.ENOSPC},
		{"a marker first, cut", "tok-secret\n", 1, 10, syscall.ENOSPC},
		{"a marker last, cut", "a tok-secret", 5, 12, syscall.ENOSPC},
		{"cut after a newline", "x\ntok-secret\n", 2, 2, syscall.ENOSPC},
		{"cut in a marker after a newline", "x\ntok-secret\n", 3, 12, syscall.ENOSPC},
		{"the longest value's marker", "tok-12345 x", 1, 9, syscall.ENOSPC},
		{"a JSON-escaped value's marker", `{"m":"ab\"cd1"}`, 7, 13, syscall.ENOSPC},
		{"a short write without an error", "a tok-secret b\n", 3, 12, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fullDisk{room: tc.room, err: tc.err}
			n, err := NewWriter(d, secrets).Write([]byte(tc.p))
			if n != tc.want {
				t.Errorf("Write = %d, want %d (the disk took %q)", n, tc.want, d.got)
			}
			if want := cmpErr(tc.err); !errors.Is(err, want) {
				t.Errorf("error %v, want %v", err, want)
			}
		})
	}
}

func cmpErr(err error) error {
	if err == nil {
		return io.ErrShortWrite
	}
	return err
}

// Wherever the disk cuts a write, n holds what TestWriterShortWrite
// says, checked against strings.Replacer itself: the file holds the
// start of what p[:n] becomes, no less of p would say as much, p[n:]
// starts between two parts of p (written again, it continues the text
// without repeating it or sending a part of a secret), n > 0 once
// anything was written, and p[n-1] is a newline just when the file ends
// with one.
func TestWriterShortWriteEverywhere(t *testing.T) {
	secrets := map[string]string{"env.T": "tok-secret", "env.A": "tok-1234", "env.B": "tok-12345", "env.Q": `ab"cd1`, "key": "line-one\nline-two"}
	r := Values(secrets)
	for _, p := range []string{
		"a tok-secret b\n",
		"tok-secret\ntok-secret\n",
		"tok-1234tok-12345tok-123456\n",
		`{"m":"ab\"cd1 ab"cd1 tok-12"}` + "\n",
		"line-one\nline-two\nline-one\n",
		"no secret here\n",
		"tok-secret",
	} {
		out := r.Replace(p)
		for room := 0; room <= len(out); room++ {
			d := &fullDisk{room: room, err: syscall.ENOSPC}
			n, err := NewWriter(d, secrets).Write([]byte(p))
			switch {
			case string(d.got) != out[:room]:
				t.Fatalf("%q, room %d: the disk took %q", p, room, d.got)
			case room == len(out) && (n != len(p) || err != nil):
				t.Errorf("%q written whole: Write = %d, %v", p, n, err)
			case room < len(out) && err == nil:
				t.Errorf("%q, room %d: Write = %d and no error", p, room, n)
			case !strings.HasPrefix(r.Replace(p[:n]), out[:room]):
				t.Errorf("%q, room %d: Write = %d, but the file holds more than p[:n] becomes", p, room, n)
			case r.Replace(p[:n])+r.Replace(p[n:]) != out:
				t.Errorf("%q, room %d: Write = %d cuts a secret", p, room, n)
			case room > 0 && n == 0:
				t.Errorf("%q, room %d: Write = 0 though the disk took %q", p, room, d.got)
			case room > 0 && room < len(out) && (out[room-1] == '\n') != (p[n-1] == '\n'):
				t.Errorf("%q, room %d: Write = %d: the file ends %q, p[:n] %q", p, room, n, out[room-1], p[n-1])
			}
			for k := 0; k < n; k++ {
				if b := r.Replace(p[:k]); r.Replace(p[:k])+r.Replace(p[k:]) == out && strings.HasPrefix(b, out[:room]) {
					t.Errorf("%q, room %d: Write = %d, but %d says as much", p, room, n, k)
					break
				}
			}
		}
	}
}

// After a full disk, the audit trail's lines are whole again once there
// is room, secrets or not: auditlog.Batch ends the line a short write
// cut before the next, which it can only when the Writer under it says
// the line was cut. It did not when the configuration had a secret: the
// next line was glued onto the fragment, and was no longer JSON.
func TestAuditCutLineWithSecrets(t *testing.T) {
	const secret = "supersecretvalue123"
	line := `{"event":"call","grant":"operator","server":"demo","tool":"echo","outcome":"ok","msg":"saw ` + secret + `","pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxx"}` + "\n"
	secrets := map[string]string{"demo env.TOKEN": secret}
	marker := strings.Index(Values(secrets).Replace(line), "[redacted:")
	for _, tc := range []struct {
		name    string
		secrets map[string]string
		room    int // the disk's, for the first line
	}{
		{"no secrets, cut in the text", nil, 50},
		{"cut in the text", secrets, 50},
		{"cut before a marker", secrets, marker},
		{"cut in a marker", secrets, marker + 5},
		{"cut after a marker", secrets, marker + len("[redacted:demo env.TOKEN]")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fullDisk{room: tc.room, err: syscall.ENOSPC}
			b := auditlog.NewBatch(NewWriter(d, tc.secrets), 0, 0)
			if _, err := b.Write([]byte(line)); err == nil {
				t.Fatal("the cut line's write did not fail")
			}
			d.room = 1 << 20
			for range 2 {
				if _, err := b.Write([]byte(line)); err != nil {
					t.Fatal(err)
				}
			}
			lines := bytes.Split(bytes.TrimSuffix(d.got, []byte("\n")), []byte("\n"))
			valid := 0
			for _, l := range lines {
				if json.Valid(l) {
					valid++
				}
			}
			if len(lines) != 3 || valid != 2 || tc.secrets != nil && bytes.Contains(d.got, []byte(secret)) {
				t.Errorf("%d lines, %d JSON, want the fragment and 2:\n%s", len(lines), valid, d.got)
			}
		})
	}
}

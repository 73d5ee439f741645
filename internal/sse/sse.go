// Package sse implements a bounded decoder of Server-Sent Events
// streams (text/event-stream, WHATWG HTML "Server-sent events",
// §9.2.6 "Interpreting an event stream").
//
// The decoder is total: any bytes yield events or a typed *Fault, never
// a panic, and its memory is bounded by Limits however long a line or an
// event runs. It does no I/O of its own beyond reading the io.Reader it
// is given, and keeps no goroutine.
package sse

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"
)

// ErrFault is matched by every *Fault.
var ErrFault = errors.New("sse: malformed event stream")

// FaultKind says what was wrong with a stream.
type FaultKind uint8

const (
	// LineTooLong: one line of the stream is longer than Limits.MaxLine.
	LineTooLong FaultKind = iota + 1
	// EventTooLarge: one event's data is larger than Limits.MaxEvent.
	EventTooLarge
	// InvalidUTF8: the stream is not UTF-8 (the format's only encoding).
	InvalidUTF8
)

// Fault is a stream the decoder refuses; the stream cannot go on after
// one (the decoder returns it from every later Next).
type Fault struct {
	Kind FaultKind
	// Offset is the stream offset of the line that went wrong.
	Offset int64
	// Limit is the bound exceeded (for the too-long kinds).
	Limit int
}

func (f *Fault) Error() string {
	at := " at byte " + strconv.FormatInt(f.Offset, 10)
	switch f.Kind {
	case LineTooLong:
		return "sse: a line longer than " + strconv.Itoa(f.Limit) + " bytes" + at
	case EventTooLarge:
		return "sse: an event larger than " + strconv.Itoa(f.Limit) + " bytes" + at
	}
	return "sse: invalid UTF-8" + at
}

// Is makes every Fault match ErrFault.
func (f *Fault) Is(target error) bool { return target == ErrFault }

// Limits bound one Decoder.
type Limits struct {
	// MaxLine caps one line (field name and value), the line break
	// excluded.
	MaxLine int
	// MaxEvent caps one event's data, the newlines joining its data
	// lines included.
	MaxEvent int
}

// Event is one dispatched event. Data is valid until the next call of
// Next; the strings are the decoder's own.
type Event struct {
	// Type is the event field, "message" when the event had none.
	Type string
	// Data is the data lines joined by "\n".
	Data []byte
	// ID is the last event ID after this event (the spec keeps it
	// across events until an id field changes it), and HasID says
	// whether the stream has set one.
	ID    string
	HasID bool
	// Retry is the reconnection time the stream last asked for in
	// milliseconds; -1 when it has asked for none.
	Retry int64
}

// Decoder reads events from a stream. It is not safe for concurrent use.
type Decoder struct {
	r      io.Reader
	lim    Limits
	buf    []byte // read buffer; buf[start:end] is unconsumed
	start  int
	end    int
	eof    error // the reader's terminal error, once seen
	off    int64 // stream offset of buf[start]
	lineAt int64 // stream offset of the line line last returned
	first  bool  // no byte seen yet (a leading BOM is skipped)
	skipLF bool  // the last line ended with CR: a following LF belongs to it

	data    []byte
	hasData bool
	typ     []byte
	lastID  string
	hasID   bool
	retry   int64
	fault   *Fault
	partial []byte // a line spanning buffer refills
}

// readSize is how much one Read asks for.
const readSize = 32 << 10

// NewDecoder returns a Decoder reading r within lim. A zero limit is
// taken as 1.
func NewDecoder(r io.Reader, lim Limits) *Decoder {
	lim.MaxLine, lim.MaxEvent = max(lim.MaxLine, 1), max(lim.MaxEvent, 1)
	return &Decoder{r: r, lim: lim, buf: make([]byte, readSize), first: true, retry: -1}
}

// LastID returns the last event ID the stream set (by an id field, in
// a dispatched event or not), and whether it set one.
func (d *Decoder) LastID() (string, bool) { return d.lastID, d.hasID }

// Retry returns the reconnection time in milliseconds the stream last
// asked for, -1 if none.
func (d *Decoder) Retry() int64 { return d.retry }

// SetLastID seeds the last event ID, as a reconnection that sent it as
// Last-Event-ID carries it on.
func (d *Decoder) SetLastID(id string) { d.lastID, d.hasID = id, id != "" }

// Next returns the next event. At the end of the stream it returns
// io.EOF (an event not yet terminated by a blank line is discarded, as
// the spec says), or the reader's error; a malformed stream gives a
// *Fault. Once it has returned an error it returns the same one.
func (d *Decoder) Next() (Event, error) {
	if d.fault != nil {
		return Event{}, d.fault
	}
	for {
		line, err := d.line()
		if err != nil {
			if f, ok := err.(*Fault); ok {
				d.fault = f
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if ev, ok := d.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if err := d.field(line); err != nil {
			return Event{}, err
		}
	}
}

// dispatch ends the event being built: one with no data line is not
// dispatched (the spec's "if the data buffer is empty"), but its id and
// retry still took effect.
func (d *Decoder) dispatch() (Event, bool) {
	typ := d.typ
	d.typ = d.typ[:0]
	if !d.hasData {
		return Event{}, false
	}
	d.hasData = false
	ev := Event{Type: "message", Data: d.data, ID: d.lastID, HasID: d.hasID, Retry: d.retry}
	if len(typ) > 0 {
		ev.Type = string(typ)
	}
	d.data = d.data[:0]
	return ev, true
}

// field applies one non-blank line.
func (d *Decoder) field(line []byte) error {
	if line[0] == ':' {
		return nil // a comment (keep-alives)
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		n := len(d.data) + len(value)
		if d.hasData {
			n++
		}
		if n > d.lim.MaxEvent {
			d.fault = &Fault{Kind: EventTooLarge, Offset: d.lineAt, Limit: d.lim.MaxEvent}
			return d.fault
		}
		if d.hasData {
			d.data = append(d.data, '\n')
		}
		d.data = append(d.data, value...)
		d.hasData = true
	case "event":
		d.typ = append(d.typ[:0], value...)
	case "id":
		// An id holding NUL is ignored (the spec's rule).
		if bytes.IndexByte(value, 0) < 0 {
			d.lastID, d.hasID = string(value), len(value) > 0
		}
	case "retry":
		if n, ok := digits(value); ok {
			d.retry = n
		}
	}
	return nil
}

// digits parses an ASCII decimal of at most 12 digits (about 31 years
// of milliseconds): anything else is ignored, as the spec ignores a
// retry that is not all digits.
func digits(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// line returns the next line without its line break (CRLF, LF or CR),
// valid until the next call. A line longer than MaxLine is a Fault; the
// last line of a stream that ends without a break is dropped with it.
func (d *Decoder) line() ([]byte, error) {
	d.partial = d.partial[:0]
	for {
		if d.start == d.end {
			if err := d.fill(); err != nil {
				return nil, err
			}
			continue
		}
		if d.skipLF {
			d.skipLF = false
			if d.buf[d.start] == '\n' {
				d.consume(1)
				continue
			}
		}
		if d.first {
			d.first = false
			if bytes.HasPrefix(d.buf[d.start:d.end], bom) {
				d.consume(len(bom))
				continue
			}
			if d.end-d.start < len(bom) && bytes.HasPrefix(bom, d.buf[d.start:d.end]) && d.eof == nil {
				d.first = true // a BOM split across reads
				if err := d.more(); err != nil {
					return nil, err
				}
				continue
			}
		}
		chunk := d.buf[d.start:d.end]
		i := bytes.IndexAny(chunk, "\r\n")
		// Where the line starts: its part already consumed is partial.
		at := d.off - int64(len(d.partial))
		if i < 0 {
			if len(d.partial)+len(chunk) > d.lim.MaxLine {
				return nil, &Fault{Kind: LineTooLong, Offset: at, Limit: d.lim.MaxLine}
			}
			d.partial = append(d.partial, chunk...)
			d.consume(len(chunk))
			continue
		}
		if len(d.partial)+i > d.lim.MaxLine {
			return nil, &Fault{Kind: LineTooLong, Offset: at, Limit: d.lim.MaxLine}
		}
		d.skipLF = chunk[i] == '\r'
		var line []byte
		if len(d.partial) == 0 {
			line = chunk[:i]
		} else {
			d.partial = append(d.partial, chunk[:i]...)
			line = d.partial
		}
		if !utf8.Valid(line) {
			return nil, &Fault{Kind: InvalidUTF8, Offset: at}
		}
		d.consume(i + 1)
		d.lineAt = at
		return line, nil
	}
}

var bom = []byte{0xEF, 0xBB, 0xBF}

func (d *Decoder) consume(n int) {
	d.start += n
	d.off += int64(n)
}

// fill reads into an empty buffer.
func (d *Decoder) fill() error {
	if d.eof != nil {
		return d.eof
	}
	d.start, d.end = 0, 0
	return d.more()
}

// more reads more bytes after buf[start:end], moving them to the front
// first when the buffer's tail is full.
func (d *Decoder) more() error {
	if d.end == len(d.buf) {
		n := copy(d.buf, d.buf[d.start:d.end])
		d.start, d.end = 0, n
	}
	for range 100 {
		n, err := d.r.Read(d.buf[d.end:])
		d.end += n
		if err != nil {
			d.eof = err
			if n > 0 {
				return nil
			}
			return err
		}
		if n > 0 {
			return nil
		}
	}
	d.eof = io.ErrNoProgress
	return d.eof
}

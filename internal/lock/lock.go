// Package lock is the format of capbridge.lock: the tool surface an
// operator approved, frozen, and the comparison of a live listing with
// it.
//
// MCP's security guidance treats a tool's description and annotations
// as untrusted and warns of servers that change a tool's meaning after it
// was approved. A lock records every part of each tool a model or a
// program relies on — name, title, description, input and output
// schemas, annotations (every key, the specification's and any other),
// icons, execution and _meta — so that a change to any of them is
// caught, classified (Diff) and, at serve time, withheld.
//
// The digests detect damage and hand edits, not forgery: whoever can
// write the file can compute them. Who may write it is the file
// system's business, which capbridge serve checks before it trusts one.
//
// The file is canonical JSON: objects with sorted keys, no insignificant
// white space beyond a fixed indentation, no HTML escaping, so that
// locking an unchanged server twice gives the same bytes. Each tool, each
// server and the whole file carry a SHA-256 digest of their canonical
// form; Decode recomputes every one, so a file edited by hand (or
// damaged) is refused rather than half-trusted. The format is versioned
// (Version); a decoder refuses versions it does not know.
//
// The package is pure: no I/O, no clock. Decode is total on hostile
// bytes (it is fuzzed): every failure is an error wrapping ErrInvalid.
package lock

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/capbridge/capbridge/internal/jsonout"
)

// Version is the lock format this package writes and reads.
const Version = 1

// MaxFileSize bounds what Decode accepts: a lock of 64 servers of a few
// hundred tools each is a few MiB.
const MaxFileSize = 32 << 20

// ErrInvalid is wrapped by every error Decode returns for bytes that are
// not a lock it can trust.
var ErrInvalid = errors.New("lock: invalid lock file")

// File is a whole lock. Servers maps each locked server's name to its
// entry.
type File struct {
	Version int                `json:"version"`
	Digest  string             `json:"digest"` // sha256 of the canonical servers object
	Servers map[string]*Server `json:"servers"`
}

// Server is one server's locked surface. Revision is the digest of its
// tools alone: it changes exactly when the surface does, whatever the
// server says its version is.
type Server struct {
	Revision   string           `json:"revision"`
	ServerInfo Info             `json:"serverInfo"`
	Tools      map[string]*Tool `json:"tools"`
}

// Info is the serverInfo the server gave at initialize. It is recorded
// for the operator and is not compared: a server may change its version
// without changing its tools.
type Info struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Title   string `json:"title,omitempty"`
}

// Tool is one locked tool descriptor. The raw members are canonical
// JSON; absent members are nil. Digests holds the digest of each part
// (Parts), Digest the digest of the whole descriptor.
type Tool struct {
	Name         string            `json:"name"`
	Title        string            `json:"title,omitempty"`
	Description  string            `json:"description,omitempty"`
	InputSchema  json.RawMessage   `json:"inputSchema"`
	OutputSchema json.RawMessage   `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage   `json:"annotations,omitempty"`
	Icons        json.RawMessage   `json:"icons,omitempty"`
	Execution    json.RawMessage   `json:"execution,omitempty"`
	Meta         json.RawMessage   `json:"_meta,omitempty"`
	Digests      map[string]string `json:"digests"`
	Digest       string            `json:"digest"`
}

// The parts of a tool that are digested apart, so that a diff (and an
// operator reading the file) can tell which one moved.
const (
	PartDescription  = "description" // title and description
	PartInputSchema  = "inputSchema"
	PartOutputSchema = "outputSchema"
	PartAnnotations  = "annotations"
	PartIcons        = "icons"
	PartExecution    = "execution"
	PartMeta         = "_meta"
)

// Listed is a tool as a server listed it, before locking: raw JSON
// members as received (they are canonicalised here).
type Listed struct {
	Name, Title, Description string
	InputSchema              []byte
	OutputSchema             []byte // nil when absent
	Annotations              []byte // nil when absent
	Icons                    []byte // nil when absent
	Execution                []byte // nil when absent
	Meta                     []byte // nil when absent
}

// NewTool locks one listed tool: its raw members canonicalised, each
// part and the whole digested. It fails only on a member that is not
// JSON.
func NewTool(l Listed) (*Tool, error) {
	t := &Tool{Name: l.Name, Title: l.Title, Description: l.Description}
	for _, m := range []struct {
		name string
		in   []byte
		out  *json.RawMessage
	}{
		{PartInputSchema, l.InputSchema, &t.InputSchema},
		{PartOutputSchema, l.OutputSchema, &t.OutputSchema},
		{PartAnnotations, l.Annotations, &t.Annotations},
		{PartIcons, l.Icons, &t.Icons},
		{PartExecution, l.Execution, &t.Execution},
		{PartMeta, l.Meta, &t.Meta},
	} {
		if m.in == nil {
			continue
		}
		c, err := Canonical(m.in)
		if err != nil {
			return nil, fmt.Errorf("lock: tool %q: %s: %w", l.Name, m.name, err)
		}
		*m.out = c
	}
	if t.InputSchema == nil {
		t.InputSchema = json.RawMessage(`{}`)
	}
	t.seal()
	return t, nil
}

// seal computes the tool's digests from its members.
func (t *Tool) seal() {
	desc, _ := canonicalOf(struct {
		Title       string `json:"title"`
		Description string `json:"description"`
	}{t.Title, t.Description})
	t.Digests = map[string]string{
		PartDescription: digest(desc),
		PartInputSchema: digest(t.InputSchema),
	}
	for part, raw := range map[string]json.RawMessage{PartOutputSchema: t.OutputSchema, PartAnnotations: t.Annotations, PartIcons: t.Icons, PartExecution: t.Execution, PartMeta: t.Meta} {
		if raw != nil {
			t.Digests[part] = digest(raw)
		}
	}
	whole := *t
	whole.Digest, whole.Digests = "", nil
	b, _ := canonicalOf(whole)
	t.Digest = digest(b)
}

// NewServer locks one server's tools. Two tools with one name are an
// error: the bridge refuses such a listing, and a lock cannot say which
// one was approved.
func NewServer(info Info, tools []*Tool) (*Server, error) {
	s := &Server{ServerInfo: info, Tools: make(map[string]*Tool, len(tools))}
	for _, t := range tools {
		if _, dup := s.Tools[t.Name]; dup {
			return nil, fmt.Errorf("lock: two tools are called %q", t.Name)
		}
		s.Tools[t.Name] = t
	}
	s.seal()
	return s, nil
}

func (s *Server) seal() {
	names := slices.Sorted(maps.Keys(s.Tools))
	var b bytes.Buffer
	for _, n := range names {
		b.WriteString(s.Tools[n].Digest)
		b.WriteByte('\n')
	}
	s.Revision = digest(b.Bytes())
}

// New assembles a lock of servers.
func New(servers map[string]*Server) *File {
	f := &File{Version: Version, Servers: servers}
	if f.Servers == nil {
		f.Servers = map[string]*Server{}
	}
	f.seal()
	return f
}

func (f *File) seal() {
	b, _ := canonicalOf(f.Servers)
	f.Digest = digest(b)
}

// Encode returns the lock's bytes: canonical JSON, indented two spaces,
// ending in a newline. The same lock always encodes to the same bytes.
func (f *File) Encode() []byte {
	b, _ := canonicalOf(f) // every member is canonical JSON already
	var out bytes.Buffer
	_ = json.Indent(&out, b, "", "  ")
	out.WriteByte('\n')
	return out.Bytes()
}

// Decode reads a lock file: strictly (unknown members are errors, so a
// misspelt member is not silently ignored), in the one version it knows,
// and with every digest checked.
func Decode(data []byte) (*File, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("%w: larger than %d MiB", ErrInvalid, MaxFileSize>>20)
	}
	// Unmarshal first: it refuses data after the object, and the
	// version decides how the rest is read.
	var probe struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if probe.Version == nil {
		return nil, fmt.Errorf("%w: no version member", ErrInvalid)
	}
	if *probe.Version != Version {
		return nil, fmt.Errorf("%w: version %d; this capbridge reads version %d (run capbridge lock again)", ErrInvalid, *probe.Version, Version)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if f.Servers == nil {
		return nil, fmt.Errorf("%w: no servers member", ErrInvalid)
	}
	for name, s := range f.Servers {
		if s == nil || s.Tools == nil {
			return nil, fmt.Errorf("%w: server %q has no tools member", ErrInvalid, name)
		}
		for key, t := range s.Tools {
			if err := t.check(key); err != nil {
				return nil, fmt.Errorf("%w: server %q: %v", ErrInvalid, name, err)
			}
		}
		want := s.Revision
		s.seal()
		if s.Revision != want {
			return nil, fmt.Errorf("%w: server %q: revision does not match its tools (edited by hand? run capbridge lock again)", ErrInvalid, name)
		}
	}
	want := f.Digest
	f.seal()
	if f.Digest != want {
		return nil, fmt.Errorf("%w: digest does not match the servers (edited by hand? run capbridge lock again)", ErrInvalid)
	}
	return &f, nil
}

// check verifies one decoded tool: its key is its name and its digests
// are its own.
func (t *Tool) check(key string) error {
	if t == nil {
		return fmt.Errorf("tool %q is null", key)
	}
	if t.Name != key {
		return fmt.Errorf("tool %q is filed under %q", t.Name, key)
	}
	if t.InputSchema == nil {
		return fmt.Errorf("tool %q has no inputSchema", key)
	}
	// The file is indented, so the raw members are read back in their
	// canonical form; the digests then say whether they are the ones
	// locked.
	for _, raw := range []*json.RawMessage{&t.InputSchema, &t.OutputSchema, &t.Annotations, &t.Icons, &t.Execution, &t.Meta} {
		if *raw == nil {
			continue
		}
		c, err := Canonical(*raw)
		if err != nil {
			return fmt.Errorf("tool %q: %v", key, err)
		}
		*raw = c
	}
	digests, whole := t.Digests, t.Digest
	t.seal()
	if !maps.Equal(digests, t.Digests) || whole != t.Digest {
		return fmt.Errorf("tool %q: digests do not match its descriptor (edited by hand? run capbridge lock again)", key)
	}
	return nil
}

// Canonical returns raw's canonical form: one JSON value, object keys
// sorted, numbers as written, no insignificant white space, no HTML
// escaping.
func Canonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not JSON: data after the value")
	}
	return canonicalOf(v)
}

// canonicalOf marshals v with sorted keys (encoding/json sorts map keys
// and keeps struct order, which this package's structs fix) and without
// HTML escaping.
func canonicalOf(v any) ([]byte, error) { return jsonout.Marshal(v) }

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Short is a digest cut to 12 hex digits, for messages.
func Short(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	return d[:min(12, len(d))]
}

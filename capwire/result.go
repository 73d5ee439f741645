package capwire

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// Block types in a result's content.
const (
	BlockText  = "text"  // Text holds the text
	BlockOther = "other" // Kind names what was dropped: "image", "audio", "resource_link", "resource", ...
)

// Result is what a tool returned. A tool that ran and failed is a Result
// with IsError set, not an error: the MCP server's own words are in
// Content.
type Result struct {
	IsError bool
	Content []Block
	// Structured is the tool's structured content as raw MessagePack (nil
	// when the tool returned none). A Result from a Client aliases the frame
	// it arrived in, which nothing else uses.
	Structured msgpack.RawMessage
	Truncated  bool // capbridge cut the content to fit its limits
}

// Block is one content block. Only text crosses the wire; every other
// block becomes a marker naming its kind.
type Block struct {
	Type string // "text" or "other" (a newer capbridge may send more; they carry only Type)
	Text string // for "text"
	Kind string // for "other": "image", "audio", "resource_link", "resource", ...
}

// ErrNoStructured is returned by Result.Decode when the tool returned no
// structured content.
var ErrNoStructured = errors.New("capwire: result has no structured content")

// Text joins the text blocks with "\n".
func (r *Result) Text() string {
	var b strings.Builder
	first := true
	for i := range r.Content {
		if r.Content[i].Type != BlockText {
			continue
		}
		if !first {
			b.WriteByte('\n')
		}
		first = false
		b.WriteString(r.Content[i].Text)
	}
	return b.String()
}

// Decode decodes Structured into v with msgpack.Unmarshal. It returns
// ErrNoStructured when there is none.
func (r *Result) Decode(v any) error {
	if len(r.Structured) == 0 {
		return ErrNoStructured
	}
	if err := msgpack.Unmarshal(r.Structured, v); err != nil {
		return fmt.Errorf("capwire: decoding structured content: %w", err)
	}
	return nil
}

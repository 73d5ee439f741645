package bridge

import (
	"encoding/base64"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/internal/truncate"
	"github.com/capbridge/capbridge/mcpwire"
)

// Caps on the server-chosen strings a block carries to a program: enough
// for any real URI, MIME type or name, never a way to fill a frame.
const (
	maxBlockURI  = 8 << 10
	maxBlockMIME = 255
	maxBlockName = 1 << 10
)

// resultBudget is what is left of one result's allowances: text
// (max_result_text, text blocks and embedded text resources together) and
// data (max_result_data, the decoded bytes of images, audio and binary
// resources). cut reports whether the last block had to be cut.
type resultBudget struct {
	text, data int
	cut        bool
}

// keepText spends the text budget on s, cutting it at a character
// boundary when it runs out.
func (rb *resultBudget) keepText(s string) string {
	rb.cut = false
	if len(s) > rb.text {
		s, rb.cut = truncate.String(s, rb.text), true
	}
	rb.text -= len(s)
	return s
}

// blockFault is a non-text block that breaks MCP's schema: why, at a
// pointer inside the block.
type blockFault struct{ why, at string }

// deny is the result_malformed denial of f in what (the server's "result"
// or "resource"), for the block at pointer block.
func (f *blockFault) deny(what, block string) outcome {
	o := deny(capwire.CodeResultMalformed, "the server's "+what+" is malformed: "+f.why+" at "+quote(block+f.at))
	o.denial.Path = block + f.at
	return o
}

// blockOf reduces a non-text MCP content block (MCP 2025-11-25,
// "ContentBlock") to what crosses: its kind, and for an image or audio
// clip its MIME type and bytes (base64-decoded, while the data budget
// lasts; past it only their size), for an embedded resource its URI, MIME
// type and text or bytes, for a resource link its URI, name, MIME type and
// declared size. A kind this version does not know crosses as a marker.
// n is the bytes it adds to the result, for the audit line.
func (rb *resultBudget) blockOf(c mcpwire.ContentBlock) (capwire.Block, int, *blockFault) {
	rb.cut = false
	blk := capwire.Block{Type: capwire.BlockOther, Kind: kindOf(c.Type)}
	raw := gjson.Parse(c.Raw)
	switch blk.Kind {
	case capwire.KindImage, capwire.KindAudio:
		blk.MIME = field(raw, "mimeType", maxBlockMIME)
		if f := rb.takeData(&blk, raw.Get("data"), "/data"); f != nil {
			return blk, 0, f
		}
	case capwire.KindResource:
		res := raw.Get("resource")
		if !res.IsObject() {
			return blk, 0, &blockFault{"an embedded resource has no resource object", "/resource"}
		}
		blk.URI = field(res, "uri", maxBlockURI)
		blk.MIME = field(res, "mimeType", maxBlockMIME)
		if t := res.Get("text"); t.Type == gjson.String {
			blk.Text = rb.keepText(strings.ToValidUTF8(t.Str, "\uFFFD"))
			blk.Size = int64(len(t.Str))
		} else if f := rb.takeData(&blk, res.Get("blob"), "/resource/blob"); f != nil {
			return blk, 0, f
		}
	case capwire.KindResourceLink:
		blk.URI = field(raw, "uri", maxBlockURI)
		blk.Name = field(raw, "name", maxBlockName)
		blk.MIME = field(raw, "mimeType", maxBlockMIME)
		if sz := raw.Get("size"); sz.Type == gjson.Number && sz.Num >= 0 && sz.Num < 1<<53 {
			blk.Size = int64(sz.Num)
		}
	}
	return blk, len(blk.Kind) + len(blk.Text) + len(blk.Data) + len(blk.URI) + len(blk.MIME) + len(blk.Name), nil
}

// contentsOf reduces one entry of a resources/read result to a
// "resource" block, as blockOf reduces an embedded resource.
func (rb *resultBudget) contentsOf(c mcpwire.ResourceContents) (capwire.Block, int, *blockFault) {
	rb.cut = false
	blk := capwire.Block{Type: capwire.BlockOther, Kind: capwire.KindResource,
		URI: truncate.Ellipsis(c.URI, maxBlockURI), MIME: truncate.Ellipsis(c.MIMEType, maxBlockMIME)}
	if c.HasText {
		blk.Text = rb.keepText(c.Text)
		blk.Size = int64(len(c.Text))
	} else if f := rb.takeData(&blk, gjson.Result{Type: gjson.String, Str: c.Blob}, "/blob"); f != nil {
		return blk, 0, f
	}
	return blk, len(blk.Kind) + len(blk.Text) + len(blk.Data) + len(blk.URI) + len(blk.MIME), nil
}

// takeData decodes the base64 string v into blk.Data if the data budget
// holds it; otherwise only blk.Size says how large it was. A value that
// is not base64 is the server's fault, named at pointer at.
func (rb *resultBudget) takeData(blk *capwire.Block, v gjson.Result, at string) *blockFault {
	if v.Type != gjson.String {
		return &blockFault{"the data is not a base64 string", at}
	}
	enc := base64.StdEncoding
	if !strings.HasSuffix(v.Str, "=") && len(v.Str)%4 != 0 {
		enc = base64.RawStdEncoding // tolerated: some servers drop the padding
	}
	n := enc.DecodedLen(len(v.Str))
	if n > rb.data {
		// Too large to carry: its exact size, without decoding it.
		blk.Size = int64(n - strings.Count(v.Str[max(0, len(v.Str)-2):], "="))
		rb.cut = true
		return nil
	}
	data := make([]byte, n)
	k, err := enc.Decode(data, []byte(v.Str))
	if err != nil {
		return &blockFault{"the data is not valid base64", at}
	}
	blk.Data, blk.Size = data[:k], int64(k)
	rb.data -= k
	return nil
}

// field is a string member of v, valid UTF-8 and cut at max bytes; "" when
// absent or not a string.
func field(v gjson.Result, name string, max int) string {
	f := v.Get(name)
	if f.Type != gjson.String {
		return ""
	}
	return truncate.Ellipsis(f.Str, max)
}

// Package demoserver implements the small MCP server that capbridge serves
// when it is started with no configuration, so that the first command in
// the README works on a fresh machine with no network.
//
// It speaks MCP over stdio (newline-delimited JSON-RPC 2.0, revisions
// 2024-11-05 to 2025-11-25), runs as a child process of the capbridge
// binary itself, and offers a few tools that are useful for trying the
// bridge out: text (echo, word_count, sha256), numbers (add), the clock
// (now) and a non-text result (color_swatch, an image, which the bridge
// reduces to an "other" block). It is deliberately simple: requests are
// served one at a time in arrival order, which is all a demo needs.
package demoserver

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Name is the server's name in serverInfo and the name capbridge gives it.
const Name = "demo"

// maxLine bounds one inbound message; the demo's tools take short text.
const maxLine = 1 << 20

var versions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

type tool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// OutputSchema describes structuredContent for the tools that return
	// it (MCP 2025-06-18 and later), so a generated façade can decode it
	// into a typed value.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  map[string]bool `json:"annotations"`
	run          func(args json.RawMessage, now func() time.Time) (result, error)
}

type content struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	Data     string `json:"data,omitempty"`
	MimeType string `json:"mimeType,omitempty"`
}

type result struct {
	Content           []content `json:"content"`
	StructuredContent any       `json:"structuredContent,omitempty"`
	IsError           bool      `json:"isError,omitempty"`
}

// errArgs marks a tool's complaint about its arguments; per the MCP spec
// (2025-11-25, SEP-1303) it is a tool execution error, not a protocol error.
type errArgs struct{ msg string }

func (e errArgs) Error() string { return e.msg }

var readOnly = map[string]bool{"readOnlyHint": true}

var tools = []tool{
	{
		Name: "add", Title: "Add two numbers",
		Description:  "Adds a and b and returns the sum, as text and as structured content {\"sum\": n}.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"a":{"type":"number","description":"first addend"},"b":{"type":"number","description":"second addend"}},"required":["a","b"],"additionalProperties":false}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}`),
		Annotations:  readOnly,
		run: func(raw json.RawMessage, _ func() time.Time) (result, error) {
			var a struct{ A, B *float64 }
			if err := strictArgs(raw, &a); err != nil || a.A == nil || a.B == nil {
				return result{}, errArgs{"add takes two numbers, a and b"}
			}
			sum := *a.A + *a.B
			if math.IsInf(sum, 0) {
				return result{}, errArgs{"the sum overflows a float64"}
			}
			return result{
				Content:           []content{{Type: "text", Text: fmt.Sprint(sum)}},
				StructuredContent: map[string]float64{"sum": sum},
			}, nil
		},
	},
	{
		Name: "color_swatch", Title: "Color swatch",
		Description: "Returns an 8x8 PNG image filled with the given color (hex, like \"#3366cc\"). The bridge passes images on only as their kind.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"color":{"type":"string","description":"a color as #rrggbb"}},"required":["color"]}`),
		Annotations: readOnly,
		run: func(raw json.RawMessage, _ func() time.Time) (result, error) {
			var a struct{ Color string }
			if err := strictArgs(raw, &a); err != nil {
				return result{}, errArgs{"color_swatch takes a color, like \"#3366cc\""}
			}
			rgb, err := hex.DecodeString(strings.TrimPrefix(a.Color, "#"))
			if err != nil || len(rgb) != 3 {
				return result{}, errArgs{fmt.Sprintf("%q is not a #rrggbb color", a.Color)}
			}
			return result{Content: []content{
				{Type: "text", Text: "an 8x8 swatch of #" + hex.EncodeToString(rgb)},
				{Type: "image", MimeType: "image/png", Data: base64.StdEncoding.EncodeToString(swatchPNG(rgb))},
			}}, nil
		},
	},
	{
		Name: "echo", Title: "Echo",
		Description: "Returns its text unchanged.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"the text to return"}},"required":["text"]}`),
		Annotations: readOnly,
		run: func(raw json.RawMessage, _ func() time.Time) (result, error) {
			var a struct{ Text *string }
			if err := strictArgs(raw, &a); err != nil || a.Text == nil {
				return result{}, errArgs{"echo takes text"}
			}
			return result{Content: []content{{Type: "text", Text: *a.Text}}}, nil
		},
	},
	{
		Name: "now", Title: "Current time",
		Description:  "Returns the current time in UTC, or in the named IANA time zone, as RFC 3339 text and as structured content {\"rfc3339\", \"unix\"}.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string","description":"an IANA zone such as Europe/Paris; default UTC"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"rfc3339":{"type":"string","format":"date-time"},"unix":{"type":"integer"}},"required":["rfc3339","unix"]}`),
		Annotations:  readOnly,
		run: func(raw json.RawMessage, now func() time.Time) (result, error) {
			var a struct{ Timezone string }
			if err := strictArgs(raw, &a); err != nil {
				return result{}, errArgs{"now takes an optional timezone"}
			}
			loc := time.UTC
			if a.Timezone != "" {
				l, err := time.LoadLocation(a.Timezone)
				if err != nil {
					return result{}, errArgs{fmt.Sprintf("unknown time zone %q", a.Timezone)}
				}
				loc = l
			}
			t := now().In(loc)
			return result{
				Content:           []content{{Type: "text", Text: t.Format(time.RFC3339)}},
				StructuredContent: map[string]any{"rfc3339": t.Format(time.RFC3339), "unix": t.Unix()},
			}, nil
		},
	},
	{
		Name: "sha256", Title: "SHA-256",
		Description: "Returns the SHA-256 digest of the text's UTF-8 bytes, in hex.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Annotations: readOnly,
		run: func(raw json.RawMessage, _ func() time.Time) (result, error) {
			var a struct{ Text *string }
			if err := strictArgs(raw, &a); err != nil || a.Text == nil {
				return result{}, errArgs{"sha256 takes text"}
			}
			sum := sha256.Sum256([]byte(*a.Text))
			return result{Content: []content{{Type: "text", Text: hex.EncodeToString(sum[:])}}}, nil
		},
	},
	{
		Name: "word_count", Title: "Word count",
		Description:  "Counts the lines, words and characters of a text; structured content {\"lines\", \"words\", \"chars\"}.",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"lines":{"type":"integer"},"words":{"type":"integer"},"chars":{"type":"integer","description":"Unicode code points"}},"required":["lines","words","chars"]}`),
		Annotations:  readOnly,
		run: func(raw json.RawMessage, _ func() time.Time) (result, error) {
			var a struct{ Text *string }
			if err := strictArgs(raw, &a); err != nil || a.Text == nil {
				return result{}, errArgs{"word_count takes text"}
			}
			c := map[string]int{
				"lines": strings.Count(*a.Text, "\n") + boolInt(*a.Text != "" && !strings.HasSuffix(*a.Text, "\n")),
				"words": len(strings.Fields(*a.Text)),
				"chars": utf8.RuneCountInString(*a.Text),
			}
			return result{
				Content:           []content{{Type: "text", Text: fmt.Sprintf("%d lines, %d words, %d characters", c["lines"], c["words"], c["chars"])}},
				StructuredContent: c,
			}, nil
		},
	},
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// strictArgs decodes a tool's arguments, refusing unknown fields so that
// a misspelt argument is reported rather than ignored.
func strictArgs(raw json.RawMessage, v any) error {
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage("{}")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// Serve runs the server on in and out until in ends. now is the clock
// (time.Now in production).
func Serve(in io.Reader, out io.Writer, now func() time.Time) error {
	br := bufio.NewReaderSize(in, 64<<10)
	bw := bufio.NewWriter(out)
	for {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			// A line over the bound: answer a parse error and go on, as
			// for any malformed line.
			if werr := reply(bw, json.RawMessage("null"), nil, &rpcError{-32700, err.Error()}); werr != nil {
				return werr
			}
			continue
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := handle(bw, line, now); err != nil {
			return err
		}
	}
}

var errLineTooLong = errors.New("line longer than 1 MiB")

// readLine returns the next line without its terminator; an over-long
// line is consumed whole and reported.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong && len(line)+len(chunk) <= maxLine {
			line = append(line, chunk...)
		} else {
			tooLong, line = true, nil
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case tooLong && (err == nil || errors.Is(err, io.EOF)):
			return nil, errLineTooLong
		case err == nil, errors.Is(err, io.EOF) && len(line) > 0:
			return bytes.TrimRight(line, "\r\n"), nil
		default:
			return nil, err
		}
	}
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type request struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

func handle(w *bufio.Writer, line []byte, now func() time.Time) error {
	var req request
	if err := json.Unmarshal(line, &req); err != nil || req.JSONRPC != "2.0" || req.Method == "" {
		if err == nil && req.Method == "" && req.ID != nil {
			return nil // a response to a request we never send
		}
		return reply(w, json.RawMessage("null"), nil, &rpcError{-32700, "parse error: not a JSON-RPC 2.0 request"})
	}
	if len(req.ID) == 0 || string(req.ID) == "null" {
		return nil // notifications need no answer
	}
	switch req.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(req.Params, &p)
		v := versions[0]
		if slices.Contains(versions, p.ProtocolVersion) {
			v = p.ProtocolVersion
		}
		return reply(w, req.ID, map[string]any{
			"protocolVersion": v,
			"capabilities":    map[string]any{"tools": map[string]bool{"listChanged": false}},
			"serverInfo":      map[string]string{"name": Name, "version": "1.0.0"},
			"instructions":    "A demonstration server built into capbridge.",
		}, nil)
	case "ping":
		return reply(w, req.ID, struct{}{}, nil)
	case "tools/list":
		return reply(w, req.ID, map[string]any{"tools": tools}, nil)
	case "tools/call":
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(req.Params, &p); err != nil || p.Name == "" {
			return reply(w, req.ID, nil, &rpcError{-32602, "tools/call needs a tool name"})
		}
		i := slices.IndexFunc(tools, func(t tool) bool { return t.Name == p.Name })
		if i < 0 {
			return reply(w, req.ID, nil, &rpcError{-32602, "Unknown tool: " + p.Name})
		}
		res, err := tools[i].run(p.Arguments, now)
		if err != nil {
			res = result{Content: []content{{Type: "text", Text: err.Error()}}, IsError: true}
		}
		return reply(w, req.ID, res, nil)
	default:
		return reply(w, req.ID, nil, &rpcError{-32601, "Method not found: " + req.Method})
	}
}

func reply(w *bufio.Writer, id json.RawMessage, res any, rerr *rpcError) error {
	msg := map[string]any{"jsonrpc": "2.0", "id": id}
	if rerr != nil {
		msg["error"] = rerr
	} else {
		msg["result"] = res
	}
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	// encoding/json escapes control characters, so b holds no newline.
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return err
	}
	return w.Flush()
}

// swatchPNG encodes an 8x8 PNG of one color.
func swatchPNG(rgb []byte) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	draw.Draw(img, img.Bounds(), &image.Uniform{color.RGBA{rgb[0], rgb[1], rgb[2], 0xff}}, image.Point{}, draw.Src)
	var b bytes.Buffer
	_ = png.Encode(&b, img) // cannot fail writing to memory
	return b.Bytes()
}

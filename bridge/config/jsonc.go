package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/capbridge/capbridge/internal/bound"
)

// utf8BOM is the byte order mark Windows editors write at the start of
// a UTF-8 file. JSON forbids it (RFC 8259 §8.1: a parser MAY ignore it),
// and editors that write it read it, so it is dropped.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// jsoncDepth checks that the JSONC text data (JSON with // and /* */
// comments and trailing commas) nests arrays and objects at most
// bound.MaxDepth deep, and returns the offset of the first bracket past
// that, or -1. It runs before the JSONC parser, which recurses once per
// level: a 4 MB file of '[' was a stack overflow, a crash no recover
// catches, in every command that reads an editor's config. It reads
// comments and strings only to skip them, and otherwise tolerates
// anything (the parser reports the syntax); it is linear and does not
// recurse.
func jsoncDepth(data []byte) int64 {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '/':
			switch {
			case i+1 < len(data) && data[i+1] == '/':
				if j := bytes.IndexByte(data[i:], '\n'); j >= 0 {
					i += j
				} else {
					i = len(data)
				}
			case i+1 < len(data) && data[i+1] == '*':
				if j := bytes.Index(data[i+2:], []byte("*/")); j >= 0 {
					i += j + 3
				} else {
					i = len(data)
				}
			}
		case '[', '{':
			if depth++; depth > bound.MaxDepth {
				return int64(i)
			}
		case ']', '}':
			depth--
		}
	}
	return -1
}

// JSONCSyntax says what a JSONC parser's (hujson's) syntax error is, at
// its line and column, without the token hujson quotes for an invalid
// literal: that token is usually a string (a password with a backslash,
// a token pasted with its line break), and may be megabytes long. The
// other errors quote one character at most.
func JSONCSyntax(err error) string {
	msg := strings.TrimPrefix(err.Error(), "hujson: ")
	if i := strings.Index(msg, "invalid literal: "); i >= 0 {
		msg = msg[:i] + "not a JSON value: a string with a bad escape or a raw line break (write \\\\ or \\n), or a word other than true, false and null"
	}
	return msg
}

// TooDeep reports the line of the first array or object of the JSONC
// text data nested more than bound.MaxDepth deep, if any: a JSONC parser
// must not be given it (see jsoncDepth).
func TooDeep(data []byte) (line int, deep bool) {
	off := jsoncDepth(data)
	if off < 0 {
		return 0, false
	}
	return lineAt(data, off), true
}

// DuplicateKey reports the first member of the JSON value data (standard
// JSON) that repeats a key of its object: its key and the lines of both
// members. JSON readers disagree on which of the two counts (most keep
// the last), so a writer that patches one cannot know it patched the one
// its reader sees.
func DuplicateKey(data []byte) (line, first int, key string, ok bool) {
	at, f, k := duplicateMember(data)
	if at < 0 {
		return 0, 0, "", false
	}
	return lineAt(data, at), lineAt(data, f), k, true
}

// duplicateMember walks the JSON value at the start of data and returns
// the offsets (in data) of the first member that repeats a key of its
// object and of the member it repeats, with the key, or -1:
// encoding/json keeps the last of two "command" members, which is not a
// choice capbridge may make silently. The value's depth was bounded by
// jsoncDepth.
func duplicateMember(data []byte) (at, first int64, key string) {
	dec := json.NewDecoder(bytes.NewReader(data))
	type level struct {
		keys   map[string]int64
		object bool
		key    bool // the next token of an object is a key
	}
	var stack []level
	for {
		tok, err := dec.Token()
		if err != nil {
			return -1, -1, "" // the decoder that follows reports the syntax
		}
		off := dec.InputOffset() // just past the token
		if len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].key {
			top := &stack[len(stack)-1]
			if k, ok := tok.(string); ok {
				if prev, dup := top.keys[k]; dup {
					return off, prev, k
				}
				top.keys[k] = off
				top.key = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, level{keys: map[string]int64{}, object: true, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, level{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			return -1, -1, ""
		}
		if top := &stack[len(stack)-1]; top.object {
			top.key = true // a value ended: a key or '}' follows
		}
	}
}

// checkDepth is the jsonFile's use of jsoncDepth, as an error at the
// line of the bracket too deep.
func (l *editorLoader) checkDepth(data []byte) bool {
	line, deep := TooDeep(data)
	if deep {
		l.fail(line, "", "an editor's MCP config nests a few levels; check what wrote this file",
			"arrays and objects nested more than %s deep", fmt.Sprint(bound.MaxDepth))
	}
	return !deep
}

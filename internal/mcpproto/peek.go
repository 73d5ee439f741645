package mcpproto

import (
	"bytes"

	"github.com/capbridge/capbridge/internal/jsonlex"
)

// PeekResponseID reads the integer id of a line that failed validation
// (a syntax error late in the line, NaN or Infinity as Python's
// json.dumps writes them by default, nesting past bound.MaxDepth, bytes
// that are not UTF-8) or that is only the kept prefix of a line over the
// cap, so the one call it answers can fail at once instead of waiting
// out its timeout.
//
// It walks the top-level object's members tolerantly, in any order (the
// TypeScript SDK writes "id" after "result"), skipping each value by its
// brackets and quotes without validating it, and reports the id once it
// has seen a plain non-negative integer "id" and a "result" or "error"
// member. A "method" member (a server request or notification), a
// second "id", or an id of any other form reports false, as does
// anything it cannot walk. It is total, allocates nothing and reads each
// byte at most once; its cost is bounded by the line, which the framer
// bounds.
func PeekResponseID(line []byte) (int64, bool) {
	i := jsonlex.SkipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return 0, false
	}
	i++
	var id int64
	haveID, response := false, false
	for {
		i = jsonlex.SkipSpace(line, i)
		if i >= len(line) || line[i] != '"' {
			return 0, false
		}
		end := skipString(line, i)
		if end < 0 {
			return 0, false
		}
		key := line[i:end]
		i = jsonlex.SkipSpace(line, end)
		if i >= len(line) || line[i] != ':' {
			return 0, false
		}
		i = jsonlex.SkipSpace(line, i+1)
		if i >= len(line) {
			return 0, false
		}
		switch string(key) {
		case `"method"`:
			return 0, false
		case `"id"`:
			if haveID {
				return 0, false
			}
			e, u, ok := jsonlex.ShortInt(line, i)
			if !ok {
				return 0, false
			}
			id, haveID, i = int64(u), true, e
		case `"result"`, `"error"`:
			response = true
		}
		if haveID && response {
			return id, true
		}
		if string(key) != `"id"` {
			if i = skipValue(line, i); i < 0 {
				return 0, false
			}
		}
		i = jsonlex.SkipSpace(line, i)
		if i >= len(line) || line[i] != ',' {
			return 0, false
		}
		i++
	}
}

// skipString returns the offset just past the string whose opening
// quote is at b[i], honouring backslash escapes, or -1 if b ends first.
func skipString(b []byte, i int) int {
	i++
	for {
		j := bytes.IndexAny(b[i:], `"\`)
		if j < 0 {
			return -1
		}
		i += j
		if b[i] == '"' {
			return i + 1
		}
		i += 2 // the backslash and the byte it escapes
		if i >= len(b) {
			return -1
		}
	}
}

// skipValue returns the offset just past the value starting at b[i]
// without validating it: a string to its closing quote, an object or
// array to its matching bracket (counted, not recursed, so any depth
// costs nothing), anything else (numbers, literals, NaN, junk) up to the
// next ',' or '}' or ']' or space. It returns -1 if b ends first.
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = skipString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	for i < len(b) {
		switch c := b[i]; {
		case c == ',' || c == '}' || c == ']' || jsonlex.IsSpace(c):
			return i
		case c == '"' || c == '{' || c == '[':
			return -1
		}
		i++
	}
	return -1
}

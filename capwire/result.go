package capwire

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/capbridge/capbridge/internal/bound"
	"github.com/capbridge/capbridge/internal/pointer"
)

// Block types in a result's content.
const (
	BlockText  = "text"  // Text holds the text
	BlockOther = "other" // Kind names the MCP block type: "image", "audio", "resource", "resource_link", ...
)

// Kinds of content block (Block.Kind): MCP's block types, and "text" for
// a text block.
const (
	KindText         = "text"
	KindImage        = "image"
	KindAudio        = "audio"
	KindResource     = "resource"      // an embedded resource: URI, and Text or Data
	KindResourceLink = "resource_link" // a link to a resource: URI, Name
)

// Result is what a tool returned. A tool that ran and failed is a Result
// with IsError set, not an error: the MCP server's own words are in
// Content.
type Result struct {
	IsError bool
	Content []Block
	// Structured is the tool's structured content as raw MessagePack (nil
	// when the tool returned none). A Result from a Client holds it, and
	// every block's Data, in memory nothing else uses.
	Structured msgpack.RawMessage
	Truncated  bool // capbridge cut the content to fit its limits
}

// Block is one content block. Kind says what it is: "text" (Text), an
// image or audio clip (Data, MIME), an embedded resource (URI, MIME, and
// Text or Data) or a resource link (URI, Name, MIME, Size as the server
// declares them). Bytes cross only up to capbridge's limit for a result
// (max_result_data): beyond it Data is nil and Size still says how many
// bytes there were.
type Block struct {
	Type string // "text" or "other" (a newer capbridge may send more; they carry only Type)
	Kind string // "text" for a text block; for "other": "image", "audio", "resource", "resource_link", ...
	Text string // a text block's text, or an embedded text resource's
	MIME string // the MIME type the server gave, if any
	Data []byte // image or audio bytes, or an embedded binary resource's; nil past the limit
	Size int64  // the size in bytes of the data (carried or not), or a link's declared size; 0: unknown
	URI  string // a resource's or link's URI
	Name string // a link's name
}

// ErrNoStructured is returned by Result.Decode when the tool returned no
// structured content.
var ErrNoStructured = errors.New("capwire: result has no structured content")

// ownBytes moves the bytes r shares with the frame it was decoded from
// (Structured, and each block's Data) into one allocation of its own, so
// that the frame's memory can be read into again.
func (r *Result) ownBytes() {
	n := len(r.Structured)
	for i := range r.Content {
		n += len(r.Content[i].Data)
	}
	if n == 0 {
		return
	}
	own := make([]byte, 0, n)
	keep := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		start := len(own)
		own = append(own, b...)
		return own[start:len(own):len(own)]
	}
	r.Structured = keep(r.Structured)
	for i := range r.Content {
		r.Content[i].Data = keep(r.Content[i].Data)
	}
}

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

// Decode fills v, a non-nil pointer, from Structured the way
// encoding/json fills a value from JSON, so that the types a façade
// generates (and a program's own structs) need no msgpack-specific care:
//
//   - a struct field is matched by its msgpack tag name, else its json tag
//     name, else its Go name; an exact match wins over a case-insensitive
//     one; "-" skips the field; untagged embedded structs are flattened;
//     keys matching no field are ignored;
//   - nil leaves a non-pointer target unchanged and sets a pointer, map,
//     slice or interface to nil;
//   - an interface target receives the decoded value as msgpack.Unmarshal
//     would produce it;
//   - a number fills any numeric target it fits exactly: an integer that
//     overflows its field, a negative into an unsigned field or a
//     fraction into an integer field is an error, never a wrapped value.
//
// Any other mismatch is a *DecodeError naming where it is; Decode never
// yields silent zero values for data that did not fit. It returns
// ErrNoStructured when there is none.
func (r *Result) Decode(v any) error {
	if len(r.Structured) == 0 {
		return ErrNoStructured
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("capwire: Decode needs a non-nil pointer, got %T", v)
	}
	var tree any
	if err := msgpack.Unmarshal(r.Structured, &tree); err != nil {
		return fmt.Errorf("capwire: decoding structured content: %w", err)
	}
	var path []byte
	return assign(rv.Elem(), tree, &path, 0)
}

// DecodeError is a value of structured content that does not fit the
// target Decode was given. Path is an RFC 6901 pointer into the content
// ("" for the whole value). It is exported for programs that report or
// branch on the place that failed.
type DecodeError struct {
	Path string
	Want string // the target's Go type
	Got  string // what the content holds there: "string", "integer 300", ...
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("capwire: structured content at %q: cannot put %s into %s", e.Path, e.Got, e.Want)
}

// assign stores the decoded value x into dst, following encoding/json's
// rules (see Decode). path is the pointer to x, grown and shrunk in place;
// depth bounds recursion although msgpack.Unmarshal already bounded x.
func assign(dst reflect.Value, x any, path *[]byte, depth int) error {
	if depth > bound.MaxDepth {
		return &DecodeError{Path: string(*path), Want: dst.Type().String(), Got: "a value nested too deep"}
	}
	mismatch := func(got string) error {
		return &DecodeError{Path: string(*path), Want: dst.Type().String(), Got: got}
	}
	if x == nil {
		switch dst.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface:
			dst.SetZero()
		}
		return nil
	}
	switch dst.Kind() {
	case reflect.Pointer:
		if dst.IsNil() {
			dst.Set(reflect.New(dst.Type().Elem()))
		}
		return assign(dst.Elem(), x, path, depth)
	case reflect.Interface:
		xv := reflect.ValueOf(x)
		if !xv.Type().AssignableTo(dst.Type()) {
			return mismatch(describeValue(x))
		}
		dst.Set(xv)
		return nil
	case reflect.Bool:
		b, ok := x.(bool)
		if !ok {
			return mismatch(describeValue(x))
		}
		dst.SetBool(b)
		return nil
	case reflect.String:
		s, ok := x.(string)
		if !ok {
			return mismatch(describeValue(x))
		}
		dst.SetString(s)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := asInt(x)
		if !ok || dst.OverflowInt(n) {
			return mismatch(describeValue(x))
		}
		dst.SetInt(n)
		return nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n, ok := asUint(x)
		if !ok || dst.OverflowUint(n) {
			return mismatch(describeValue(x))
		}
		dst.SetUint(n)
		return nil
	case reflect.Float32, reflect.Float64:
		f, ok := asFloat(x)
		if !ok || dst.OverflowFloat(f) {
			return mismatch(describeValue(x))
		}
		dst.SetFloat(f)
		return nil
	case reflect.Slice:
		if dst.Type().Elem().Kind() == reflect.Uint8 {
			if b, ok := x.([]byte); ok {
				dst.SetBytes(append([]byte(nil), b...))
				return nil
			}
		}
		elems, ok := x.([]any)
		if !ok {
			return mismatch(describeValue(x))
		}
		s := reflect.MakeSlice(dst.Type(), len(elems), len(elems))
		for i, e := range elems {
			if err := assignAt(s.Index(i), e, path, depth, strconv.Itoa(i)); err != nil {
				return err
			}
		}
		dst.Set(s)
		return nil
	case reflect.Array:
		elems, ok := x.([]any)
		if !ok {
			return mismatch(describeValue(x))
		}
		for i := range dst.Len() {
			if i >= len(elems) {
				dst.Index(i).SetZero()
				continue
			}
			if err := assignAt(dst.Index(i), elems[i], path, depth, strconv.Itoa(i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		if dst.Type().Key().Kind() != reflect.String {
			return mismatch(describeValue(x))
		}
		m, ok := stringMap(x)
		if !ok {
			return mismatch(describeValue(x))
		}
		if dst.IsNil() {
			dst.Set(reflect.MakeMapWithSize(dst.Type(), len(m)))
		}
		et := dst.Type().Elem()
		for _, k := range sortedKeys(m) {
			e := reflect.New(et).Elem()
			if err := assignAt(e, m[k], path, depth, k); err != nil {
				return err
			}
			dst.SetMapIndex(reflect.ValueOf(k).Convert(dst.Type().Key()), e)
		}
		return nil
	case reflect.Struct:
		m, ok := stringMap(x)
		if !ok {
			return mismatch(describeValue(x))
		}
		// Field by field, in declaration order: the value under the
		// field's exact name, else under the first (in sorted order) key
		// that matches it case-insensitively.
		var folded []string
		for _, f := range structFields(dst.Type()) {
			k := f.name
			x, ok := m[k]
			if !ok {
				if folded == nil {
					folded = sortedKeys(m)
				}
				for _, key := range folded {
					if strings.EqualFold(key, f.name) {
						k, x, ok = key, m[key], true
						break
					}
				}
			}
			if !ok {
				continue
			}
			fv, err := fieldByIndex(dst, f.index)
			if err != nil {
				return err
			}
			if err := assignAt(fv, x, path, depth, k); err != nil {
				return err
			}
		}
		return nil
	}
	return mismatch(describeValue(x))
}

// assignAt is assign one level down, at reference token tok.
func assignAt(dst reflect.Value, x any, path *[]byte, depth int, tok string) error {
	n := len(*path)
	*path = pointer.AppendToken(*path, tok)
	err := assign(dst, x, path, depth+1)
	*path = (*path)[:n]
	return err
}

func asInt(x any) (int64, bool) {
	switch n := x.(type) {
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		return int64(n), n <= math.MaxInt64
	case float32:
		return floatInt(float64(n))
	case float64:
		return floatInt(n)
	}
	return 0, false
}

// floatInt accepts a float that is exactly an int64, as encoding/json
// accepts 3.0 (but not 3.5) for an integer field.
func floatInt(f float64) (int64, bool) {
	if f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
		return 0, false
	}
	return int64(f), true
}

func asUint(x any) (uint64, bool) {
	switch n := x.(type) {
	case uint8:
		return uint64(n), true
	case uint16:
		return uint64(n), true
	case uint32:
		return uint64(n), true
	case uint64:
		return n, true
	case float32, float64:
		f, _ := asFloat(n)
		if f != math.Trunc(f) || f < 0 || f >= 1<<64 {
			return 0, false
		}
		return uint64(f), true
	}
	i, ok := asInt(x)
	return uint64(i), ok && i >= 0
}

func asFloat(x any) (float64, bool) {
	switch n := x.(type) {
	case float32:
		return float64(n), true
	case float64:
		return n, true
	case uint64:
		return float64(n), true
	}
	i, ok := asInt(x)
	return float64(i), ok
}

// stringMap views a decoded map whose keys are all strings.
func stringMap(x any) (map[string]any, bool) {
	switch m := x.(type) {
	case map[string]any:
		return m, true
	case map[any]any:
		out := make(map[string]any, len(m))
		for k, v := range m {
			s, ok := k.(string)
			if !ok {
				return nil, false
			}
			out[s] = v
		}
		return out, true
	}
	return nil, false
}

// sortedKeys makes the order of assignment, and so which of two bad
// values is reported, deterministic.
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func describeValue(x any) string {
	switch v := x.(type) {
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case []byte:
		return "binary data"
	case []any:
		return "an array"
	case map[string]any, map[any]any:
		return "a map"
	case float32, float64:
		return fmt.Sprintf("the number %v", v)
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		return fmt.Sprintf("the integer %v", v)
	}
	return fmt.Sprintf("a %T", x)
}

// decodeField is one settable field of a struct target.
type decodeField struct {
	name  string
	index []int
}

// structFields lists t's fields under the names Decode matches: msgpack
// tag, else json tag, else Go name; untagged embedded structs are
// flattened, and a shallower field hides a deeper one of the same name.
func structFields(t reflect.Type) []decodeField {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]decodeField)
	}
	f := computeFields(t)
	fieldCache.Store(t, f)
	return f
}

// fieldCache holds structFields by type; it grows with the struct types a
// program decodes into, which its source bounds.
var fieldCache sync.Map

func computeFields(t reflect.Type) []decodeField {
	var out []decodeField
	seen := map[string]bool{}
	type level struct {
		t     reflect.Type
		index []int
	}
	cur := []level{{t: t}}
	for depth := 0; len(cur) > 0 && depth < bound.MaxDepth; depth++ {
		var next []level
		found := map[string]bool{}
		for _, l := range cur {
			for i := range l.t.NumField() {
				sf := l.t.Field(i)
				index := append(append([]int(nil), l.index...), i)
				name, tagged := fieldName(sf)
				if name == "-" {
					continue
				}
				ft := sf.Type
				if sf.Anonymous && !tagged {
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if ft.Kind() == reflect.Struct {
						next = append(next, level{t: ft, index: index})
						continue
					}
				}
				if !sf.IsExported() || seen[name] {
					continue
				}
				found[name] = true
				out = append(out, decodeField{name: name, index: index})
			}
		}
		for n := range found {
			seen[n] = true
		}
		cur = next
	}
	return out
}

func fieldName(sf reflect.StructField) (string, bool) {
	for _, key := range []string{"msgpack", "json"} {
		if tag, ok := sf.Tag.Lookup(key); ok {
			name, _, _ := strings.Cut(tag, ",")
			if name != "" {
				return name, true
			}
		}
	}
	return sf.Name, false
}

// fieldByIndex is reflect.Value.FieldByIndex that allocates nil embedded
// pointers on the way, as encoding/json does, and refuses an unexported
// one it cannot set.
func fieldByIndex(v reflect.Value, index []int) (reflect.Value, error) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				if !v.CanSet() {
					return reflect.Value{}, fmt.Errorf("capwire: Decode cannot set embedded pointer to unexported %s", v.Type().Elem())
				}
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, nil
}

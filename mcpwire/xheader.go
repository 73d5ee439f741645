package mcpwire

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/capbridge/capbridge/internal/jsonlex"
)

// The 2026-07-28 revision's x-mcp-header: a tool marks properties of its
// inputSchema whose values a Streamable HTTP client MUST mirror into an
// Mcp-Param-{name} header, so intermediaries can route on them. A
// declaration that breaks the revision's constraints makes the tool
// invalid, and a client over Streamable HTTP MUST leave it out of the
// listing (logging why); over stdio the annotation means nothing.

// headerParam is one annotated property: the header's name part and
// the chain of properties keys leading to the value.
type headerParam struct {
	name string
	path []string
}

// maxHeaderParams bounds the annotations one tool may carry.
const maxHeaderParams = 32

var errStop = errors.New("stop")

// headerParams reads a tool's x-mcp-header annotations from its
// inputSchema (validated JSON): the properties reachable from the root
// through properties keys only, each of type string, integer or
// boolean, with names that are tokens unique without regard to case. An
// annotation on any other subschema, or one that breaks a rule, is an
// error naming it. Only subschemas are read as schemas, by the keyword
// that holds them (JSON Schema 2020-12's applicators, and the $defs that
// $ref reaches): a property named x-mcp-header, or an instance under
// default, const, enum or examples, is data and no annotation.
func headerParams(schema []byte) ([]headerParam, error) {
	var out []headerParam
	seen := map[string]bool{}
	var walk func(node []byte, path []string, reachable bool, where string) error
	// each walks every subschema of a keyword whose value is a map of
	// them (asMap) or a list of them.
	each := func(v []byte, asMap bool, where string) error {
		i := jsonlex.SkipSpace(v, 0)
		switch {
		case i < len(v) && v[i] == '{' && asMap:
			return jsonlex.EachMember(v, func(k, sub []byte) error {
				return walk(sub, nil, false, where+"/"+jsonlex.Unquote(k))
			})
		case i < len(v) && v[i] == '[' && !asMap:
			return jsonlex.EachElement(v, func(n int, sub []byte) error {
				return walk(sub, nil, false, where+"/"+strconv.Itoa(n))
			})
		}
		return nil
	}
	walk = func(node []byte, path []string, reachable bool, where string) error {
		i := jsonlex.SkipSpace(node, 0)
		if i >= len(node) || node[i] != '{' {
			return nil // a boolean schema, or no schema
		}
		var ann, typ []byte
		var props []byte
		err := jsonlex.EachMember(node, func(k, v []byte) error {
			key := jsonlex.Unquote(k)
			switch key {
			case "x-mcp-header":
				ann = v
			case "type":
				typ = v
			case "properties":
				if reachable {
					props = v
					return nil
				}
				return each(v, true, where+"/properties")
			case "patternProperties", "$defs", "definitions", "dependentSchemas",
				"dependencies": // draft-07's: a schema, or a list of names that each() passes over
				return each(v, true, where+"/"+key)
			case "allOf", "anyOf", "oneOf", "prefixItems":
				return each(v, false, where+"/"+key)
			case "items":
				if err := each(v, false, where+"/items"); err != nil { // the array form of older drafts
					return err
				}
				return walk(v, nil, false, where+"/items")
			case "additionalProperties", "unevaluatedProperties", "propertyNames", "contains",
				"additionalItems", "unevaluatedItems", "not", "if", "then", "else", "contentSchema":
				return walk(v, nil, false, where+"/"+key)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if ann != nil {
			if !reachable || len(path) == 0 {
				return fmt.Errorf("x-mcp-header at %s is not on a property reachable from the schema's root through properties alone", where)
			}
			if ann[0] != '"' {
				return fmt.Errorf("x-mcp-header at %s is not a string", where)
			}
			name := jsonlex.Unquote(ann)
			switch {
			case !isToken(name):
				return fmt.Errorf("x-mcp-header %q at %s is not an HTTP token", name, where)
			case seen[strings.ToLower(name)]:
				return fmt.Errorf("x-mcp-header %q at %s is used twice", name, where)
			case typ == nil || (!jsonlex.KeyIs(typ, "string") && !jsonlex.KeyIs(typ, "integer") && !jsonlex.KeyIs(typ, "boolean")) || typ[0] != '"':
				return fmt.Errorf("x-mcp-header %q at %s is on a property whose type is not string, integer or boolean", name, where)
			case len(out) == maxHeaderParams:
				return fmt.Errorf("more than %d x-mcp-header annotations", maxHeaderParams)
			}
			seen[strings.ToLower(name)] = true
			out = append(out, headerParam{name: name, path: path})
		}
		if props != nil && props[0] == '{' {
			return jsonlex.EachMember(props, func(k, v []byte) error {
				key := jsonlex.Unquote(k)
				return walk(v, append(path[:len(path):len(path)], key), true, where+"/properties/"+key)
			})
		}
		return nil
	}
	if err := walk(schema, nil, true, "#"); err != nil {
		return nil, err
	}
	return out, nil
}

// paramHeaders renders the Mcp-Param headers of one call: each
// annotated property's value in args (a validated JSON object), when
// present and not null, as its string form (a JavaScript-safe integer in
// decimal, true or false), in the revision's Base64 form when it is not
// plain visible ASCII. A value of the wrong kind is the caller's error.
func paramHeaders(params []headerParam, args []byte, set func(name, value string)) error {
	for _, p := range params {
		v := lookupPath(args, p.path)
		if v == nil || v[0] == 'n' {
			continue
		}
		var s string
		switch {
		case v[0] == '"':
			s = jsonlex.Unquote(v)
		case v[0] == 't' || v[0] == 'f':
			s = string(v)
		default:
			n, ok := safeInteger(v)
			if !ok {
				return errInvalid(fmt.Sprintf("the argument %s mirrored into Mcp-Param-%s is not a safe integer, string or boolean", strings.Join(p.path, "."), p.name))
			}
			s = strconv.FormatInt(n, 10)
		}
		set("Mcp-Param-"+p.name, headerValue(s))
	}
	return nil
}

// safeInteger returns the value of the JSON number v (validated) when it
// is an integer, in JSON Schema's sense (a zero fraction: 42.0 and 4.2e1
// are 42), within JavaScript's safe range, as the revision requires of a
// mirrored integer. It works on the digits, exactly: a float64 would
// round what lies near the range's ends. Its work is bounded by v's
// length and a cap on the exponent.
func safeInteger(v []byte) (int64, bool) {
	num := string(v)
	neg := strings.HasPrefix(num, "-")
	num = strings.TrimPrefix(num, "-")
	mant, exp := num, 0
	if i := strings.IndexAny(num, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(num[i+1:], "+"))
		if err != nil {
			e = math.MaxInt32 // beyond any cap below; its sign is all that counts
			if strings.HasPrefix(num[i+1:], "-") {
				e = math.MinInt32
			}
		}
		mant, exp = num[:i], e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return 0, true // zero, whatever its exponent
	}
	// The value is digits × 10^(point - len(digits)), point counted from
	// the first significant digit.
	point := len(intPart) - (len(intPart+frac) - len(digits)) + exp
	const maxDigits = 16 // 2^53-1 has 16
	switch {
	case point > maxDigits || point <= 0:
		return 0, false // too large, or below one
	case point < len(digits):
		if strings.Trim(digits[point:], "0") != "" {
			return 0, false // a fraction
		}
		digits = digits[:point]
	default:
		digits += strings.Repeat("0", point-len(digits))
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > 1<<53-1 {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

// lookupPath returns the value at the properties path in obj, or nil.
func lookupPath(obj []byte, path []string) []byte {
	cur := obj
	for _, key := range path {
		i := jsonlex.SkipSpace(cur, 0)
		if i >= len(cur) || cur[i] != '{' {
			return nil
		}
		var next []byte
		_ = jsonlex.EachMember(cur[i:], func(k, v []byte) error {
			if jsonlex.KeyIs(k, key) {
				next = v
				return errStop
			}
			return nil
		})
		if next == nil {
			return nil
		}
		cur = next
	}
	return cur
}

// mirrored applies x-mcp-header to a complete listing over Streamable
// HTTP in the 2026-07-28 era: each tool's annotations are recorded for
// its calls, and a tool whose annotations are invalid is left out, with a
// warning naming it and why (a lock then reports it removed). Elsewhere
// the listing is returned as it is.
func (c *Client) mirrored(tools []Tool) []Tool {
	if c.Era() != EraModern || c.car.kind() != "streamable-http" {
		return tools
	}
	params := map[string][]headerParam{}
	dropped := map[string]string{}
	kept := tools[:0]
	for _, t := range tools {
		p, err := headerParams(t.InputSchema)
		if err != nil {
			dropped[t.Name] = err.Error()
			c.log.Warn().Str("tool", preview([]byte(t.Name))).Str("reason", err.Error()).Msg("mcpwire: tool dropped: its x-mcp-header declaration is invalid (2026-07-28 Streamable HTTP)")
			continue
		}
		if len(p) > 0 {
			params[t.Name] = p
		}
		kept = append(kept, t)
	}
	c.hdr.Store(&params)
	c.dropped.Store(&dropped)
	return kept
}

// Dropped returns the tools the last listing left out because their
// x-mcp-header declaration breaks the 2026-07-28 revision's rules (a
// Streamable HTTP client must drop them), each with why; empty
// elsewhere. The map is the caller's.
func (c *Client) Dropped() map[string]string {
	out := map[string]string{}
	if m := c.dropped.Load(); m != nil {
		for k, v := range *m {
			out[k] = v
		}
	}
	return out
}

// headerParamsOf returns the x-mcp-header annotations of tool, from the
// last listing.
func (c *Client) headerParamsOf(tool string) []headerParam {
	if m := c.hdr.Load(); m != nil {
		return (*m)[tool]
	}
	return nil
}

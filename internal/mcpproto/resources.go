package mcpproto

import (
	"strconv"

	"github.com/capbridge/capbridge/internal/jsonlex"
)

// ResourceContents is one entry of a resources/read result (MCP
// 2025-11-25, "TextResourceContents" and "BlobResourceContents"): its
// URI, MIME type, and its text or its base64 blob.
type ResourceContents struct {
	URI      string
	MIMEType string
	Text     string
	Blob     string // base64, as the server sent it
	HasText  bool
	HasBlob  bool
}

// ReadResourceResult is a decoded resources/read result.
type ReadResourceResult struct {
	Contents []ResourceContents
}

// DecodeReadResourceResult decodes the result of resources/read. Every
// entry must be an object with a string uri and either a string text or
// a string blob; a fault is a *ProtocolFault naming where.
func DecodeReadResourceResult(raw []byte) (*ReadResourceResult, error) {
	obj, err := objectResult("resources/read", raw)
	if err != nil {
		return nil, err
	}
	r := &ReadResourceResult{}
	var have bool
	var fault error
	_ = jsonlex.EachMember(obj, func(key, v []byte) error {
		if !jsonlex.KeyIs(key, "contents") {
			return nil
		}
		have = true
		if v[0] != '[' {
			fault = pfault("resources/read", "/contents", -1, "expected array, found "+kindName(v))
			return fault
		}
		// A member given twice counts once, the last, as encoding/json
		// and DecodeToolsPage read it.
		r.Contents = r.Contents[:0]
		return jsonlex.EachElement(v, func(i int, ev []byte) error {
			if i == maxEntries {
				fault = tooMany("resources/read", "/contents", i)
				return fault
			}
			at := "/contents/" + strconv.Itoa(i)
			c, why, where := decodeContents(ev)
			if why != "" {
				fault = pfault("resources/read", at+where, i, why)
				return fault
			}
			r.Contents = append(r.Contents, c)
			return nil
		})
	})
	switch {
	case fault != nil:
		return nil, fault
	case !have:
		return nil, pfault("resources/read", "/contents", -1, "missing")
	}
	return r, nil
}

func decodeContents(v []byte) (c ResourceContents, why, at string) {
	if v[0] != '{' {
		return c, "resource contents is not an object (found " + kindName(v) + ")", ""
	}
	var haveURI bool
	_ = jsonlex.EachMember(v, func(key, mv []byte) error {
		switch {
		case jsonlex.KeyIs(key, "uri"):
			c.URI, why = str(mv)
			haveURI, at = true, "/uri"
		case jsonlex.KeyIs(key, "mimeType"):
			c.MIMEType, why = str(mv)
			at = "/mimeType"
		case jsonlex.KeyIs(key, "text"):
			c.Text, why = str(mv)
			c.HasText, at = true, "/text"
		case jsonlex.KeyIs(key, "blob"):
			c.Blob, why = str(mv)
			c.HasBlob, at = true, "/blob"
		}
		if why != "" {
			return errStop
		}
		return nil
	})
	switch {
	case why != "":
		return c, why, at
	case !haveURI:
		return c, "missing", "/uri"
	case !c.HasText && !c.HasBlob:
		return c, "neither text nor blob", ""
	}
	return c, "", ""
}

// ListPage is one page of resources/list (member "resources") or
// resources/templates/list (member "resourceTemplates"): its entries, raw,
// each an object naming its uri (or uriTemplate) and name.
type ListPage struct {
	Items      [][]byte
	NextCursor string
	HasNext    bool
}

// DecodeListPage decodes a page of method, whose entries are under member
// and must each carry the string members key and "name". Entries are kept
// raw: a harness that lists resources reads what the server said.
func DecodeListPage(method, member, key string, raw []byte) (*ListPage, error) {
	obj, err := objectResult(method, raw)
	if err != nil {
		return nil, err
	}
	p := &ListPage{}
	var have bool
	var fault error
	_ = jsonlex.EachMember(obj, func(k, v []byte) error {
		switch {
		case jsonlex.KeyIs(k, member):
			have = true
			if v[0] != '[' {
				fault = pfault(method, "/"+member, -1, "expected array, found "+kindName(v))
				return fault
			}
			p.Items = p.Items[:0] // the last of a duplicated member, as above
			return jsonlex.EachElement(v, func(i int, ev []byte) error {
				if i == maxEntries {
					fault = tooMany(method, "/"+member, i)
					return fault
				}
				if why, at := namedEntry(ev, key); why != "" {
					fault = pfault(method, "/"+member+"/"+strconv.Itoa(i)+at, i, why)
					return fault
				}
				p.Items = append(p.Items, ev)
				return nil
			})
		case jsonlex.KeyIs(k, "nextCursor"):
			var why string
			if p.NextCursor, why = str(v); why != "" {
				fault = pfault(method, "/nextCursor", -1, why)
				return fault
			}
			p.HasNext = true
		}
		return nil
	})
	switch {
	case fault != nil:
		return nil, fault
	case !have:
		return nil, pfault(method, "/"+member, -1, "missing")
	}
	return p, nil
}

// namedEntry checks that v is an object with string members key and name.
func namedEntry(v []byte, key string) (why, at string) {
	if v[0] != '{' {
		return "entry is not an object (found " + kindName(v) + ")", ""
	}
	var haveKey, haveName bool
	_ = jsonlex.EachMember(v, func(k, mv []byte) error {
		var name string
		switch {
		case jsonlex.KeyIs(k, key):
			name, haveKey = key, true
		case jsonlex.KeyIs(k, "name"):
			name, haveName = "name", true
		default:
			return nil
		}
		if _, why = str(mv); why != "" {
			at = "/" + name
			return errStop
		}
		return nil
	})
	switch {
	case why != "":
		return why, at
	case !haveKey:
		return "missing", "/" + key
	case !haveName:
		return "missing", "/name"
	}
	return "", ""
}

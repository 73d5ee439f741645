package mcpproto

import (
	"strconv"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/jsonlex"
	"github.com/capbridge/capbridge/internal/truncate"
)

// The stateless revision (2026-07-28) has no handshake: a client learns
// a server through server/discover and names its revision, capabilities
// and identity in every request's _meta under these reserved keys.
const (
	ModernVersion          = "2026-07-28"
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// Error codes the 2026-07-28 revision reserves (basic/index §Error Codes).
const (
	CodeHeaderMismatch                  = -32020
	CodeMissingRequiredClientCapability = -32021
	CodeUnsupportedProtocolVersion      = -32022
)

// DiscoverResult is the decoded answer to server/discover. Capabilities
// is the raw capabilities object; ToolsListChanged is read out of it.
// TTLMs and CacheScope say how long the answer may be reused and by
// whom; ServerInfo comes from _meta and is zero when the server sent
// none (HasServerInfo false).
type DiscoverResult struct {
	SupportedVersions []string
	Capabilities      []byte
	HasTools          bool
	ToolsListChanged  bool
	Instructions      string
	TTLMs             int64
	CacheScope        string
	ServerInfo        Implementation
	HasServerInfo     bool
}

// Supports reports whether v is one of the revisions the server named.
func (d *DiscoverResult) Supports(v string) bool {
	for _, s := range d.SupportedVersions {
		if s == v {
			return true
		}
	}
	return false
}

// ResultType is a 2026-07-28 result's resultType.
type ResultType uint8

const (
	// ResultComplete: the request is answered (also an absent resultType,
	// as the spec requires).
	ResultComplete ResultType = iota + 1
	// ResultInputRequired: the server wants input from the client
	// (elicitation, sampling, roots) before it answers; the client must
	// retry the request with inputResponses.
	ResultInputRequired
	// ResultTask: the server answered with a task handle (the tasks
	// extension, SEP-2663) to follow to the result; only tools/call may.
	ResultTask
)

// maxSupportedVersions bounds the versions a discover answer may name,
// so a hostile server cannot make the client hold an unbounded list.
const maxSupportedVersions = 64

// DecodeResultType reads the resultType member of a result object: an
// absent member is complete, "complete", "input_required" and "task" are known,
// and anything else (another string, another JSON kind) is a fault at
// /resultType, which is how the spec says an unrecognized value must be
// treated. what names the result in the fault.
func DecodeResultType(what string, raw []byte) (ResultType, error) {
	obj, err := objectResult(what, raw)
	if err != nil {
		return 0, err
	}
	return decodeResultType(what, obj)
}

// DecodeResultTypeValue is DecodeResultType for a result that arrived
// validated (Message.Result): it is walked, not checked again.
func DecodeResultTypeValue(what string, v jsonlex.Value) (ResultType, error) {
	switch obj := v.Bytes(); {
	case v.IsZero():
		return 0, pfault(what, "", -1, "missing result")
	case obj[0] != '{':
		return 0, pfault(what, "", -1, "result is not an object")
	}
	return decodeResultType(what, v.Bytes())
}

// decodeResultType reads the validated object obj's resultType.
func decodeResultType(what string, obj []byte) (ResultType, error) {
	rt := ResultComplete
	var fault error
	_ = jsonlex.EachMember(obj, func(key, v []byte) error {
		if !jsonlex.KeyIs(key, "resultType") {
			return nil
		}
		s, why := str(v)
		switch {
		case why != "":
		case s == "complete":
			rt = ResultComplete
		case s == "input_required":
			rt = ResultInputRequired
		case s == "task":
			rt = ResultTask
		default:
			why = "unknown result type " + strconv.Quote(truncate.Ellipsis(s, 64))
		}
		if why != "" {
			fault = pfault(what, "/resultType", -1, why)
			return fault
		}
		return nil
	})
	if fault != nil {
		return 0, fault
	}
	return rt, nil
}

// DecodeDiscoverResult decodes the result of server/discover. It does
// not judge the versions; the client does. A result that is not
// complete, lacks supportedVersions or capabilities, or holds a member
// of the wrong type is a fault: the answer is what decides the era, so
// it is held to its schema. ttlMs and cacheScope, required by the
// schema, are tolerated when absent (no reuse is the safe reading).
func DecodeDiscoverResult(raw []byte) (*DiscoverResult, error) {
	const what = "server/discover"
	rt, err := DecodeResultType(what, raw)
	if err != nil {
		return nil, err
	}
	if rt != ResultComplete {
		return nil, pfault(what, "/resultType", -1, "discover result is not complete")
	}
	obj, _ := objectResult(what, raw)
	r := &DiscoverResult{}
	var haveVersions, haveCaps bool
	var fault error
	_ = jsonlex.EachMember(obj, func(key, v []byte) error {
		var why, at string
		switch {
		case jsonlex.KeyIs(key, "supportedVersions"):
			haveVersions, at = true, "/supportedVersions"
			r.SupportedVersions, why, at = versionList(v, at)
		case jsonlex.KeyIs(key, "capabilities"):
			haveCaps, at = true, "/capabilities"
			if r.Capabilities, why = object(v); why == "" {
				var ir InitializeResult
				why, at = decodeServerCaps(v, &ir)
				r.HasTools, r.ToolsListChanged = ir.HasTools, ir.ToolsListChanged
			}
		case jsonlex.KeyIs(key, "instructions"):
			r.Instructions, why = str(v)
			at = "/instructions"
		case jsonlex.KeyIs(key, "ttlMs"):
			r.TTLMs, why = nonNegative(v)
			at = "/ttlMs"
		case jsonlex.KeyIs(key, "cacheScope"):
			r.CacheScope, why = cacheScope(v)
			at = "/cacheScope"
		case jsonlex.KeyIs(key, "_meta"):
			at = "/_meta"
			if _, why = object(v); why == "" {
				why, at = serverInfoMeta(v, &r.ServerInfo, &r.HasServerInfo)
			}
		}
		if why != "" {
			fault = pfault(what, at, -1, why)
			return fault
		}
		return nil
	})
	switch {
	case fault != nil:
		return nil, fault
	case !haveVersions:
		return nil, pfault(what, "/supportedVersions", -1, "missing")
	case !haveCaps:
		return nil, pfault(what, "/capabilities", -1, "missing")
	}
	return r, nil
}

// versionList reads an array of version strings, at most
// maxSupportedVersions of them.
func versionList(v []byte, at string) ([]string, string, string) {
	if v[0] != '[' {
		return nil, "expected array, found " + kindName(v), at
	}
	out := []string{} // non-nil: an empty list is still a list the server sent
	why, where := "", at
	_ = jsonlex.EachElement(v, func(i int, ev []byte) error {
		if i == maxSupportedVersions {
			why = "more than " + strconv.Itoa(maxSupportedVersions) + " versions"
			return errStop
		}
		s, w := str(ev)
		if w != "" {
			why, where = w, at+"/"+strconv.Itoa(i)
			return errStop
		}
		out = append(out, s)
		return nil
	})
	return out, why, where
}

// nonNegative reads a non-negative integer that fits int64.
func nonNegative(v []byte) (int64, string) {
	if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
		return 0, "expected number, found " + kindName(v)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 {
		return 0, "expected a non-negative integer"
	}
	return n, ""
}

func cacheScope(v []byte) (string, string) {
	s, why := str(v)
	if why == "" && s != "public" && s != "private" {
		why = "cache scope " + strconv.Quote(truncate.Ellipsis(s, 64)) + " is neither public nor private"
	}
	return s, why
}

// serverInfoMeta reads _meta's serverInfo member when present.
func serverInfoMeta(meta []byte, impl *Implementation, have *bool) (why, at string) {
	_ = jsonlex.EachMember(meta, func(key, v []byte) error {
		if jsonlex.KeyIs(key, MetaServerInfo) {
			*have = true
			why, at = decodeImplementation(v, impl, "/_meta/"+MetaServerInfo)
			return errStop
		}
		return nil
	})
	return why, at
}

// UnsupportedVersion reads the data of a -32022 error: the revisions
// the server supports and the one it says was requested. ok is false
// when data is not the object the spec defines (an array of strings
// under "supported").
func UnsupportedVersion(data []byte) (supported []string, requested string, ok bool) {
	obj, isObj := validObject(data)
	if !isObj {
		return nil, "", false
	}
	var have bool
	bad := false
	_ = jsonlex.EachMember(obj, func(key, v []byte) error {
		switch {
		case jsonlex.KeyIs(key, "supported"):
			var why string
			supported, why, _ = versionList(v, "")
			have, bad = true, why != ""
		case jsonlex.KeyIs(key, "requested"):
			requested, _ = str(v)
		}
		return nil
	})
	if !have || bad {
		return nil, "", false
	}
	return supported, requested, true
}

// RequiredCapabilities reads data.requiredCapabilities of a -32021
// error, raw; nil when data does not carry it as an object.
func RequiredCapabilities(data []byte) []byte {
	obj, isObj := validObject(data)
	if !isObj {
		return nil
	}
	var caps []byte
	_ = jsonlex.EachMember(obj, func(key, v []byte) error {
		if jsonlex.KeyIs(key, "requiredCapabilities") && v[0] == '{' {
			caps = v
			return errStop
		}
		return nil
	})
	return caps
}

// SubscriptionID reads _meta[io.modelcontextprotocol/subscriptionId]
// from a notification's params: the id of the subscriptions/listen
// request the notification belongs to, an integer or a string as the
// server echoed it. ok is false when params carry none.
func SubscriptionID(params []byte) (ID, bool) {
	obj, isObj := validObject(params)
	if !isObj {
		return ID{}, false
	}
	var id ID
	ok := false
	_ = jsonlex.EachMember(obj, func(key, v []byte) error {
		if !jsonlex.KeyIs(key, "_meta") {
			return nil
		}
		if v[0] == '{' {
			_ = jsonlex.EachMember(v, func(k, mv []byte) error {
				if jsonlex.KeyIs(k, MetaSubscriptionID) {
					if d, why := decodeID(mv); why == "" {
						id, ok = d, true
					}
					return errStop
				}
				return nil
			})
		}
		return errStop
	})
	return id, ok
}

// validObject returns b's one JSON object value, or false when b is
// anything else, invalid UTF-8 included (as objectResult refuses it):
// these readers take bytes straight from a server, and the strings they
// return reach messages.
func validObject(b []byte) ([]byte, bool) {
	if len(b) == 0 {
		return nil, false
	}
	start, end, _, serr := jsonlex.Valid(b, 0)
	if serr != nil || b[start] != '{' || !utf8.Valid(b[start:end]) {
		return nil, false
	}
	return b[start:end], true
}

// InputRequestMethods names, for a message, at most n entries of an
// input_required result's inputRequests as "key (method)". It is total:
// anything unreadable is left out.
func InputRequestMethods(raw []byte, n int) []string {
	obj, ok := validObject(raw)
	if !ok {
		return nil
	}
	var out []string
	_ = jsonlex.EachMember(obj, func(key, v []byte) error {
		if !jsonlex.KeyIs(key, "inputRequests") {
			return nil
		}
		if v[0] == '{' {
			_ = jsonlex.EachMember(v, func(k, rv []byte) error {
				if len(out) == n {
					return errStop
				}
				method := "?"
				if rv[0] == '{' {
					_ = jsonlex.EachMember(rv, func(mk, mv []byte) error {
						if jsonlex.KeyIs(mk, "method") && mv[0] == '"' {
							method = truncate.Ellipsis(jsonlex.Unquote(mv), 64)
						}
						return nil
					})
				}
				out = append(out, truncate.Ellipsis(jsonlex.Unquote(k), 64)+" ("+method+")")
				return nil
			})
		}
		return errStop
	})
	return out
}

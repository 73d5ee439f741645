package lock

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// Class is one kind of drift between a locked tool and the live one.
// Its text is stable: skew --json, status, the audit trail and denials
// carry it.
type Class string

// The drift classes. An input schema change is widened when every
// argument object the locked schema accepted is still accepted (an
// optional property added, a requirement dropped), narrowed when the
// reverse holds (a property removed, a requirement added), and changed
// when neither can be decided from the schemas' property lists.
const (
	ToolAdded           Class = "tool_added"
	ToolRemoved         Class = "tool_removed"
	InputSchemaWidened  Class = "input_schema_widened"
	InputSchemaNarrowed Class = "input_schema_narrowed"
	InputSchemaChanged  Class = "input_schema_changed"
	OutputSchemaChanged Class = "output_schema_changed"
	DescriptionChanged  Class = "description_changed" // title or description
	AnnotationsChanged  Class = "annotations_changed"
	IconsChanged        Class = "icons_changed"
	ExecutionChanged    Class = "execution_changed" // execution, taskSupport among it
	MetaChanged         Class = "meta_changed"
	ServerNotLocked     Class = "server_not_locked"
	ServerNotConfigured Class = "server_not_configured"
)

// Drift is one difference between the lock and a live listing. Tool is
// empty for a whole server (ServerNotLocked, ServerNotConfigured).
type Drift struct {
	Server string `json:"server"`
	Tool   string `json:"tool,omitempty"`
	Class  Class  `json:"class"`
	// Detail says what moved, for a person: the properties added or
	// removed, or the digests before and after.
	Detail string `json:"detail,omitempty"`
}

// CompareTool classifies how live differs from locked: nil when they
// are the same descriptor, else one Drift per part that moved, in a
// fixed order.
func CompareTool(server string, locked, live *Tool) []Drift {
	if locked.Digest == live.Digest {
		return nil
	}
	var out []Drift
	add := func(c Class, detail string) {
		out = append(out, Drift{Server: server, Tool: live.Name, Class: c, Detail: detail})
	}
	if locked.Digests[PartInputSchema] != live.Digests[PartInputSchema] {
		c, detail := compareInput(locked.InputSchema, live.InputSchema)
		add(c, detail)
	}
	for _, p := range []struct {
		part  string
		class Class
	}{
		{PartOutputSchema, OutputSchemaChanged},
		{PartDescription, DescriptionChanged},
		{PartAnnotations, AnnotationsChanged},
		{PartIcons, IconsChanged},
		{PartExecution, ExecutionChanged},
		{PartMeta, MetaChanged},
	} {
		if a, b := locked.Digests[p.part], live.Digests[p.part]; a != b {
			add(p.class, shortOr(a)+" → "+shortOr(b))
		}
	}
	return out
}

func shortOr(d string) string {
	if d == "" {
		return "absent"
	}
	return Short(d)
}

// CompareServer diffs a live server's tools with its locked entry, in
// tool-name order.
func CompareServer(name string, locked, live *Server) []Drift {
	var out []Drift
	names := slices.Sorted(maps.Keys(live.Tools))
	for _, n := range names {
		lt, ok := locked.Tools[n]
		if !ok {
			out = append(out, Drift{Server: name, Tool: n, Class: ToolAdded})
			continue
		}
		out = append(out, CompareTool(name, lt, live.Tools[n])...)
	}
	for _, n := range slices.Sorted(maps.Keys(locked.Tools)) {
		if _, ok := live.Tools[n]; !ok {
			out = append(out, Drift{Server: name, Tool: n, Class: ToolRemoved})
		}
	}
	return out
}

// Compare diffs every live server with the lock, in server-name order:
// a server the lock lacks, or one it has that is not live, is a drift of
// its own.
func Compare(locked, live *File) []Drift {
	var out []Drift
	for _, n := range slices.Sorted(maps.Keys(live.Servers)) {
		ls, ok := locked.Servers[n]
		if !ok {
			out = append(out, Drift{Server: n, Class: ServerNotLocked})
			continue
		}
		out = append(out, CompareServer(n, ls, live.Servers[n])...)
	}
	for _, n := range slices.Sorted(maps.Keys(locked.Servers)) {
		if _, ok := live.Servers[n]; !ok {
			out = append(out, Drift{Server: n, Class: ServerNotConfigured})
		}
	}
	return out
}

// objectSchema is the part of an input schema whose change can be
// ordered: which properties there are and which are required. Rest is
// every other member, which must be unchanged for a decision.
type objectSchema struct {
	props    map[string]string // property → its canonical schema
	required []string
	rest     map[string]string
}

func readObjectSchema(raw []byte) (*objectSchema, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	o := &objectSchema{props: map[string]string{}, rest: map[string]string{}}
	for k, v := range m {
		switch k {
		case "properties":
			var p map[string]json.RawMessage
			if json.Unmarshal(v, &p) != nil {
				return nil, false
			}
			for name, s := range p {
				o.props[name] = string(s)
			}
		case "required":
			if json.Unmarshal(v, &o.required) != nil {
				return nil, false
			}
			slices.Sort(o.required)
		default:
			o.rest[k] = string(v)
		}
	}
	return o, true
}

// compareInput classifies an input schema change. Only the top level's
// properties and required lists are ordered; a change anywhere else (a
// property's own schema, additionalProperties, a type) is changed,
// since whether it widens or narrows would need a schema subsumption
// check that JSON Schema does not make decidable in general.
func compareInput(locked, live []byte) (Class, string) {
	a, okA := readObjectSchema(locked)
	b, okB := readObjectSchema(live)
	if !okA || !okB || !maps.Equal(a.rest, b.rest) {
		return InputSchemaChanged, "the schema changed beyond its properties and required lists"
	}
	var widen, narrow, undecided []string
	for p, s := range b.props {
		old, ok := a.props[p]
		switch {
		case !ok && !slices.Contains(b.required, p):
			widen = append(widen, "property "+p+" added")
		case !ok:
			narrow = append(narrow, "required property "+p+" added")
		case old != s:
			undecided = append(undecided, "property "+p+" changed")
		}
	}
	for p := range a.props {
		if _, ok := b.props[p]; !ok {
			// A caller that sent it is now refused (or, worse,
			// silently ignored).
			narrow = append(narrow, "property "+p+" removed")
		}
	}
	for _, r := range b.required {
		if !slices.Contains(a.required, r) && a.props[r] != "" {
			narrow = append(narrow, "property "+r+" now required")
		}
	}
	for _, r := range a.required {
		if !slices.Contains(b.required, r) && b.props[r] != "" {
			widen = append(widen, "property "+r+" no longer required")
		}
	}
	slices.Sort(widen)
	slices.Sort(narrow)
	slices.Sort(undecided)
	switch {
	case len(undecided) > 0 || (len(widen) > 0 && len(narrow) > 0):
		return InputSchemaChanged, strings.Join(slices.Concat(narrow, widen, undecided), "; ")
	case len(narrow) > 0:
		return InputSchemaNarrowed, strings.Join(narrow, "; ")
	case len(widen) > 0:
		return InputSchemaWidened, strings.Join(widen, "; ")
	}
	// Equal property sets with unequal bytes: the required list was
	// reordered, which canonical JSON keeps.
	return InputSchemaChanged, "the schema was rewritten without a change to its properties"
}

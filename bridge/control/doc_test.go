package control

import (
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const specPath = "../../docs/control.md"

// spec is what docs/control.md's tables say.
type spec struct {
	replies map[string]string              // request kind → reply kind, from the "### `op` → `reply`" headings
	fields  map[string]map[string][]string // section → in (request, reply, server, match) → fields, "name" or "name?" when optional
	codes   []string                       // the error codes
}

var (
	opHeading = regexp.MustCompile("^### `([a-z_]+)` → `([a-z_]+)`( or `([a-z_]+)`)?$")
	fieldRow  = regexp.MustCompile("^\\| `([a-z_0-9]+)` \\| (request|reply|server|match|run|run end|quota|usage|quota usage) \\| ([^|]*) \\|")
	codeRow   = regexp.MustCompile("^\\| `([a-z_]+)` \\| [^|]* \\|$")
)

func readSpec(t *testing.T) spec {
	t.Helper()
	doc, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	s := spec{replies: map[string]string{}, fields: map[string]map[string][]string{}}
	section := ""
	for line := range strings.Lines(string(doc)) {
		line = strings.TrimRight(line, "\n")
		if m := opHeading.FindStringSubmatch(line); m != nil {
			section = m[1]
			s.replies[m[1]] = m[2]
			if m[4] != "" {
				s.replies[m[1]] += " or " + m[4]
			}
			continue
		}
		if strings.HasPrefix(line, "#") {
			section = strings.TrimLeft(line, "# ")
			continue
		}
		if m := fieldRow.FindStringSubmatch(line); m != nil {
			name := m[1]
			if strings.Contains(m[3], "optional") {
				name += "?"
			}
			if s.fields[section] == nil {
				s.fields[section] = map[string][]string{}
			}
			s.fields[section][m[2]] = append(s.fields[section][m[2]], name)
			continue
		}
		if m := codeRow.FindStringSubmatch(line); m != nil && section == "Error codes" {
			s.codes = append(s.codes, m[1])
		}
	}
	return s
}

// tags lists the msgpack keys of struct v's fields, "name?" when the
// field is omitted when empty.
func tags(v any) []string {
	var out []string
	typ := reflect.TypeOf(v)
	for i := range typ.NumField() {
		name, opts, _ := strings.Cut(typ.Field(i).Tag.Get("msgpack"), ",")
		if opts == "omitempty" {
			name += "?"
		}
		out = append(out, name)
	}
	return out
}

// docs/control.md is the specification: every request and reply kind,
// every field with its optionality, and the closed set of error codes
// are what the code reads and writes.
func TestSpecMatchesCode(t *testing.T) {
	s := readSpec(t)
	type op struct {
		reply    string
		req, rep any
	}
	ops := map[string]op{
		opGrant:     {replyGranted, GrantRequest{}, Granted{}},
		opRevoke:    {replyRevoked, RevokeRequest{}, Revoked{}},
		opStatus:    {replyStatus, struct{}{}, Status{}},
		opFacade:    {replyFacade, FacadeRequest{}, Facade{}},
		opDescribe:  {replyDescribed, DescribeRequest{}, Described{}},
		opSearch:    {replyFound, SearchRequest{}, Found{}},
		opListing:   {replyListed, ListingRequest{}, Listed{}},
		opResources: {replyResourced, ResourcesRequest{}, ResourceList{}},
		opCall:      {"result or denied", CallRequest{}, struct{}{}}, // the reply is capwire's
		opMetrics:   {replyMetrics, MetricsRequest{}, Metrics{}},
		opSurface:   {replySurface, SurfaceRequest{}, Surface{}},
		opReload:    {replyReloaded, ReloadRequest{}, Reloaded{}},
	}
	if got, want := slices.Sorted(maps.Keys(s.replies)), slices.Sorted(maps.Keys(ops)); !slices.Equal(got, want) {
		t.Fatalf("the spec's requests are %v, the code's %v", got, want)
	}
	for name, o := range ops {
		if s.replies[name] != o.reply {
			t.Errorf("%s: the spec answers %q, the code %q", name, s.replies[name], o.reply)
		}
		check(t, name+" request", s.fields[name]["request"], tags(o.req))
		check(t, name+" reply", s.fields[name]["reply"], tags(o.rep))
	}
	check(t, "server status", s.fields[opStatus]["server"], tags(ServerStatus{}))
	check(t, "search match", s.fields[opSearch]["match"], tags(Match{}))
	check(t, "grant run", s.fields[opGrant]["run"], tags(Run{}))
	check(t, "revoke run end", s.fields[opRevoke]["run end"], tags(RunEnd{}))
	check(t, "grant quota", s.fields[opGrant]["quota"], tags(Quota{}))
	check(t, "status grant usage", s.fields[opStatus]["usage"], tags(GrantUsage{}))
	check(t, "status quota usage", s.fields[opStatus]["quota usage"], tags(QuotaUsage{}))
	check(t, "error reply", s.fields["Errors"]["reply"], tags(Error{}))
	check(t, "error codes", s.codes, slices.Collect(maps.Keys(codes)))
}

func check(t *testing.T, what string, spec, code []string) {
	t.Helper()
	spec, code = slices.Sorted(slices.Values(spec)), slices.Sorted(slices.Values(code))
	if !slices.Equal(spec, code) {
		t.Errorf("%s: the spec has %q, the code %q", what, spec, code)
	}
}

// Package bigtools implements a generator of large, realistic MCP tool
// listings, for measuring what a server with thousands of tools costs.
//
// Tool i is a pure function of i: its name, prose and input schema are
// drawn from families modelled on the tools real servers list (a code
// host's issues and pull requests, a tracker's tasks, a database's
// tables, a browser, a file store): two to ten properties each, of
// every kind a schema generator meets there (strings with formats,
// patterns and enums, bounded integers and numbers, booleans with
// defaults, arrays of strings and of objects, nested objects with their
// own required members, nullable unions, oneOf, a $ref into $defs), with
// descriptions of one to three sentences and annotations. A tool's JSON
// is about a kilobyte, as the tools of such servers are.
package bigtools

import (
	"fmt"
	"strconv"
)

// Tool appends tool i's JSON object (a tools/list entry) to b.
func Tool(b []byte, i int) []byte {
	f := families[i%len(families)]
	verb := verbs[(i/len(families))%len(verbs)]
	b = append(b, `{"name":`...)
	b = strconv.AppendQuote(b, fmt.Sprintf("%s_%s_%d", f.resource, verb, i))
	b = append(b, `,"description":`...)
	b = strconv.AppendQuote(b, fmt.Sprintf("%s %s in %s. %s Returns the %s as the service stores it, with its identifier and the time of the last change.", titleVerb[verb], f.noun, f.where, sentences[i%len(sentences)], f.noun))
	b = append(b, `,"inputSchema":{"type":"object","properties":{`...)
	n := 2 + i%9 // two to ten properties
	var required []string
	useRef := i%11 == 0
	for j := range n {
		if j > 0 {
			b = append(b, ',')
		}
		p := props[(i*7+j*3)%len(props)]
		name := p.name + strconv.Itoa(j)
		schema := p.schema
		if j == 0 {
			name = f.key
			schema = `{"type":"string","minLength":1,"description":"Which one: its name or identifier, as the service shows it."}`
		}
		b = strconv.AppendQuote(b, name)
		b = append(b, ':')
		if useRef && j == n-1 {
			b = append(b, `{"$ref":"#/$defs/pagination","description":"Which page of results to return."}`...)
		} else {
			b = append(b, schema...)
		}
		if j == 0 || (i+j)%3 == 0 {
			required = append(required, name)
		}
	}
	b = append(b, `},"required":[`...)
	for j, r := range required {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, r)
	}
	b = append(b, ']')
	if useRef {
		b = append(b, `,"$defs":{"pagination":{"type":"object","properties":{"page":{"type":"integer","minimum":1,"description":"Page number, from 1."},"perPage":{"type":"integer","minimum":1,"maximum":100,"default":30,"description":"Results per page, at most 100."}},"additionalProperties":false}}`...)
	}
	b = append(b, `,"additionalProperties":false}`...)
	readOnly := verb == "get" || verb == "list" || verb == "search"
	b = append(b, `,"annotations":{"title":`...)
	b = strconv.AppendQuote(b, fmt.Sprintf("%s %s %d", titleVerb[verb], f.noun, i))
	b = append(b, `,"readOnlyHint":`...)
	b = strconv.AppendBool(b, readOnly)
	if !readOnly {
		b = append(b, `,"destructiveHint":`...)
		b = strconv.AppendBool(b, verb == "delete")
	}
	b = append(b, `,"openWorldHint":true}}`...)
	return b
}

// Page appends a tools/list result holding tools [from, min(from+size,
// n)) to b: {"tools":[…]} with "nextCursor" set to the next page's first
// index while tools remain. extra, when not empty, is a tool object put
// first on the first page (a server's own tool beside the generated ones);
// it counts as one of the n.
func Page(b []byte, from, size, n int, extra string) []byte {
	b = append(b, `{"tools":[`...)
	end := min(from+size, n)
	for i := from; i < end; i++ {
		if i > from {
			b = append(b, ',')
		}
		if i == 0 && extra != "" {
			b = append(b, extra...)
			continue
		}
		b = Tool(b, i)
	}
	b = append(b, ']')
	if end < n {
		b = append(b, `,"nextCursor":"`...)
		b = strconv.AppendInt(b, int64(end), 10)
		b = append(b, '"')
	}
	return append(b, '}')
}

type family struct {
	resource, noun, where string
	key                   string // the first property's name
}

var families = []family{
	{"issues", "an issue", "a repository", "repo"},
	{"pulls", "a pull request", "a repository", "repo"},
	{"tasks", "a task", "a project", "projectId"},
	{"rows", "a row", "a table of the database", "table"},
	{"pages", "a page", "a workspace", "workspaceId"},
	{"files", "a file", "the file store", "path"},
	{"browser", "a tab", "the browser", "url"},
	{"calendar", "an event", "a calendar", "calendarId"},
	{"tickets", "a ticket", "the help desk", "queue"},
	{"deployments", "a deployment", "an environment", "environment"},
	{"API-notion", "a block", "a page", "block_id"},
	{"alerts", "an alert", "the monitoring service", "service"},
}

var verbs = []string{"get", "list", "create", "update", "delete", "search", "archive", "assign", "comment", "move", "merge", "export", "import", "sync", "watch", "lock", "label", "close"}

var titleVerb = map[string]string{
	"get": "Gets", "list": "Lists", "create": "Creates", "update": "Updates", "delete": "Deletes",
	"search": "Searches for", "archive": "Archives", "assign": "Assigns", "comment": "Comments on",
	"move": "Moves", "merge": "Merges", "export": "Exports", "import": "Imports", "sync": "Synchronises",
	"watch": "Watches", "lock": "Locks", "label": "Labels", "close": "Closes",
}

var sentences = []string{
	"Use it when the user names the item by its identifier; to find one by its text, search first.",
	"The caller must have write access; a read-only token is refused with a permission error.",
	"Large results are paginated: pass the cursor from the previous answer to continue.",
	"Fields left out keep their current values, and null clears a field that may be empty.",
	"",
	"Rate limited to 30 requests a minute per token; a 429 answer says when to retry.",
}

type prop struct {
	name   string
	schema string
}

var props = []prop{
	{"owner", `{"type":"string","minLength":1,"maxLength":39,"pattern":"^[A-Za-z0-9-]+$","description":"The account that owns the repository, a user or an organisation."}`},
	{"title", `{"type":"string","maxLength":256,"description":"A short title, shown in lists."}`},
	{"body", `{"type":"string","description":"The text, in Markdown. Mentions and references are linked."}`},
	{"state", `{"type":"string","enum":["open","closed","all"],"default":"open","description":"Which items to include by state."}`},
	{"limit", `{"type":"integer","minimum":1,"maximum":100,"default":30,"description":"The most results to return."}`},
	{"labels", `{"type":"array","items":{"type":"string"},"maxItems":50,"description":"Label names to apply; unknown labels are created."}`},
	{"draft", `{"type":"boolean","default":false,"description":"Whether to keep it as a draft."}`},
	{"since", `{"type":"string","format":"date-time","description":"Only items changed at or after this time, in RFC 3339."}`},
	{"assignee", `{"anyOf":[{"type":"string"},{"type":"null"}],"description":"The login of the person to assign, or null to clear."}`},
	{"priority", `{"type":"number","minimum":0,"maximum":1,"description":"A weight between 0 and 1."}`},
	{"filter", `{"type":"object","properties":{"field":{"type":"string","description":"The field to filter on."},"op":{"type":"string","enum":["eq","ne","lt","gt","contains"]},"value":{"oneOf":[{"type":"string"},{"type":"number"},{"type":"boolean"}]}},"required":["field","op","value"],"description":"A condition each result must meet."}`},
	{"sort", `{"type":"object","properties":{"by":{"type":"string","enum":["created","updated","comments"]},"direction":{"type":"string","enum":["asc","desc"],"default":"desc"}},"description":"The order of the results."}`},
	{"items", `{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"quantity":{"type":"integer","minimum":0}},"required":["id"]},"description":"The lines to add, each an item and how many."}`},
	{"url", `{"type":"string","format":"uri","description":"An absolute URL, http or https."}`},
	{"id", `{"oneOf":[{"type":"integer","minimum":1},{"type":"string","pattern":"^[0-9a-f]{24}$"}],"description":"The item's number, or its 24-hex-digit key."}`},
	{"metadata", `{"type":"object","additionalProperties":{"type":"string"},"description":"Free-form key and value pairs stored with the item."}`},
}

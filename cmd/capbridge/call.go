package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/capwire"
	"github.com/capbridge/capbridge/interchange"
	"github.com/capbridge/capbridge/internal/inert"
)

// maxArgFile bounds what key=@file and `-` read: a tool's arguments travel
// in one frame, and a larger file is a mistake.
const maxArgFile = control.MaxFrame / 2

func runCall(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("call", "capbridge call [flags] SERVER TOOL [key=value | key:=json | key=@file]... | '{json}' | -", `
Call a tool with operator authority. Arguments are given one per word:

  key=value    typed by the tool's input schema: a number, a boolean, a JSON
               array or object where the schema wants one, else a string
  key:=json    the value as JSON, verbatim: n:=5, tags:='["a","b"]'
  key=@file    the file's contents, typed as key=value would be

or as one JSON object ('{"text":"hi"}'), or - to read that object from stdin.
The result's text is printed, one block a line; --json prints the whole
result (or denial) as one JSON object. Exit 1 when the call is denied or the
tool reports an error.`)
	cf := addClientFlags(fs, true)
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) < 2 {
		return fs.usageError(stderr, "name a server and a tool")
	}
	server, tool, words := pos[0], pos[1], pos[2:]
	argsJSON, err := callArgs(cf, server, tool, words, os.Stdin)
	if err != nil {
		fmt.Fprintf(stderr, "capbridge call: %s\n", explain(err))
		var ae *argError
		if errors.As(err, &ae) {
			return exitUsage
		}
		return exitError
	}
	// The same total conversion the bridge applies to a program's
	// arguments, in reverse: a JSON value that has no exact MessagePack
	// form is refused here, naming its path.
	mp, err := interchange.ToMsgPack(argsJSON)
	if err != nil {
		fmt.Fprintf(stderr, "capbridge call: the arguments are not valid: %v; fix the value at that path\n", err)
		return exitUsage
	}
	if len(mp) == 0 || (mp[0]&0xf0 != 0x80 && mp[0] != 0xde && mp[0] != 0xdf) {
		return fs.usageError(stderr, `the arguments must be a JSON object, such as '{"text":"hi"}', or key=value words`)
	}
	req := &control.CallRequest{Server: server, Tool: tool, Args: mp}
	if flagGiven(fs, "timeout") {
		// The bridge's deadline is a little shorter than ours, so a slow
		// tool is reported as the bridge's timeout denial, not as our
		// read timing out on the socket.
		bridgeTimeout := cf.timeout - min(time.Second, cf.timeout/10)
		req.TimeoutMS = uint64(max(bridgeTimeout, time.Millisecond) / time.Millisecond)
	} else {
		// No deadline is sent, so the server's own apply: call_timeout,
		// which its progress notifications extend, up to
		// max_call_timeout. Neither can exceed config.MaxDuration, so the
		// bridge has answered by then.
		cf.timeout = config.MaxDuration + time.Minute
	}
	r, err := withControl(cf, func(ctx context.Context, c *control.Client) (*capwire.Result, error) { return c.Call(ctx, req) })
	var denied *capwire.Denied
	if err != nil && !errors.As(err, &denied) {
		fmt.Fprintln(stderr, "capbridge call:", explain(err))
		return exitError
	}
	if cf.json {
		return printCallJSON(r, denied, stdout, stderr)
	}
	if denied != nil {
		fmt.Fprintf(stderr, "denied: %s: %s", inert.Line(denied.Code), inert.Line(denied.Message))
		if denied.Path != "" {
			fmt.Fprintf(stderr, " (at %s)", inert.Line(denied.Path))
		}
		if denied.RPCCode != 0 {
			fmt.Fprintf(stderr, " [rpc %d]", denied.RPCCode)
		}
		fmt.Fprintln(stderr)
		if hint := denialHint(denied.Code, server, tool); hint != "" {
			fmt.Fprintln(stderr, hint)
		}
		return exitError
	}
	for _, b := range r.Content {
		if b.Type == capwire.BlockText {
			fmt.Fprintln(stdout, forTerminal(stdout, b.Text))
		} else {
			fmt.Fprintf(stdout, "[%s]\n", inert.Line(b.Kind))
		}
	}
	if len(r.Structured) > 0 {
		js, err := interchange.ToJSON(r.Structured)
		if err == nil {
			var out bytes.Buffer
			if json.Indent(&out, js, "", "  ") == nil {
				js = out.Bytes()
			}
			fmt.Fprintf(stdout, "structured: %s\n", forTerminal(stdout, string(js)))
		}
	}
	if r.Truncated {
		fmt.Fprintln(stderr, "(the text was truncated to the bridge's max_result_text; raise it in [bridge] to see more)")
	}
	if r.IsError {
		fmt.Fprintln(stderr, "the tool reported an error (its text is above)")
		return exitError
	}
	return exitOK
}

// denialHint says what to do about a denial an operator's call can get.
func denialHint(code, server, tool string) string {
	switch code {
	case capwire.CodeUnknownCapability:
		return "`capbridge status` lists the servers"
	case capwire.CodeUnknownTool:
		return fmt.Sprintf("`capbridge tools %s` lists its tools", server)
	case capwire.CodeBadArguments:
		return fmt.Sprintf("`capbridge tools --schema %s` shows what %s takes", server, tool)
	case capwire.CodeTimeout:
		return "raise --timeout (the server's max_call_timeout caps it)"
	case capwire.CodeServerUnavailable:
		return "`capbridge status` shows why the server is not serving"
	case capwire.CodeOverloaded:
		return "try again, or raise the server's max_inflight / max_queue"
	}
	return ""
}

// argError is a mistake in the arguments as typed: the command line is
// wrong, not the service.
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

func argErrorf(format string, a ...any) error { return &argError{fmt.Sprintf(format, a...)} }

// callArgs turns the words after SERVER TOOL into one JSON object.
func callArgs(cf *clientFlags, server, tool string, words []string, stdin io.Reader) ([]byte, error) {
	switch {
	case len(words) == 0:
		return []byte("{}"), nil
	case len(words) == 1 && words[0] == "-":
		data, err := io.ReadAll(io.LimitReader(stdin, maxArgFile+1))
		if err != nil {
			return nil, fmt.Errorf("reading the arguments from stdin: %v", err)
		}
		if len(data) > maxArgFile {
			return nil, argErrorf("stdin holds more than %d bytes; a tool's arguments must fit in one frame", maxArgFile)
		}
		return data, nil
	case len(words) == 1 && strings.HasPrefix(strings.TrimSpace(words[0]), "{"):
		return []byte(words[0]), nil
	}
	schema, err := inputSchema(cf, server, tool)
	if err != nil {
		return nil, err
	}
	return typedArgs(schema, tool, words, readArgFile)
}

// readArgFile reads key=@file's file: at most maxArgFile bytes and one
// more, to tell a larger file, so that /dev/zero or a growing log is
// refused rather than read until memory runs out.
func readArgFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxArgFile+1))
}

// inputSchema fetches tool's input schema from the running capbridge.
func inputSchema(cf *clientFlags, server, tool string) (gjson.Result, error) {
	listing, err := fetchListing(cf, server)
	if err != nil {
		return gjson.Result{}, err
	}
	var names []string
	for _, t := range gjson.Get(listing, "tools").Array() {
		if t.Get("name").String() == tool {
			return t.Get("inputSchema"), nil
		}
		names = append(names, t.Get("name").String())
	}
	return gjson.Result{}, argErrorf("server %q has no tool %q; its tools: %s", server, tool, strings.Join(names, ", "))
}

func fetchListing(cf *clientFlags, server string) (string, error) {
	l, err := withControl(cf, func(ctx context.Context, c *control.Client) (*control.Listed, error) {
		return c.Listing(ctx, &control.ListingRequest{Server: server})
	})
	if err != nil {
		return "", err
	}
	return l.Listing, nil
}

// typedArgs builds the arguments object from key=value, key:=json and
// key=@file words, typing each value by the property schema names.
func typedArgs(schema gjson.Result, tool string, words []string, readFile func(string) ([]byte, error)) ([]byte, error) {
	props := schema.Get("properties")
	out := map[string]json.RawMessage{}
	for _, w := range words {
		key, raw, isJSON := "", "", false
		if i := strings.Index(w, ":="); i > 0 && (strings.IndexByte(w, '=') < 0 || i < strings.IndexByte(w, '=')) {
			key, raw, isJSON = w[:i], w[i+2:], true
		} else if k, v, ok := strings.Cut(w, "="); ok && k != "" {
			key, raw = k, v
		} else {
			return nil, argErrorf("%q is not an argument: write key=value, key:=json or key=@file", w)
		}
		if _, dup := out[key]; dup {
			return nil, argErrorf("%s is given twice", key)
		}
		prop := props.Get(gjson.Escape(key))
		if !prop.Exists() && props.Exists() && schema.Get("additionalProperties").Type == gjson.False {
			return nil, argErrorf("%s takes no argument %q; it takes: %s", tool, key, strings.Join(propNames(props), ", "))
		}
		if isJSON {
			if !json.Valid([]byte(raw)) {
				return nil, argErrorf("%s:= wants JSON, and %q is not; quote a string as %s:='\"text\"'", key, raw, key)
			}
			out[key] = json.RawMessage(raw)
			continue
		}
		if file, ok := strings.CutPrefix(raw, "@"); ok {
			data, err := readFile(file)
			if err != nil {
				return nil, argErrorf("%s=@%s: %v; name a readable file (for a string that starts with @, write %s:='\"@…\"')", key, file, err, key)
			}
			if len(data) > maxArgFile {
				return nil, argErrorf("%s=@%s: more than %d bytes", key, file, maxArgFile)
			}
			raw = string(data)
		}
		v, err := typed(key, raw, prop)
		if err != nil {
			return nil, err
		}
		out[key] = v
	}
	var missing []string
	for _, r := range schema.Get("required").Array() {
		if _, ok := out[r.String()]; !ok {
			missing = append(missing, r.String())
		}
	}
	if len(missing) > 0 {
		return nil, argErrorf("%s requires %s; add %s=…", tool, strings.Join(missing, ", "), missing[0])
	}
	return json.Marshal(out)
}

func propNames(props gjson.Result) []string {
	var names []string
	props.ForEach(func(k, _ gjson.Result) bool { names = append(names, k.String()); return true })
	return names
}

// schemaType is the JSON type a property schema wants: its "type", the
// first one other than null when it lists several, or the type of its
// enum's values; "" when it says nothing usable.
func schemaType(prop gjson.Result) string {
	t := prop.Get("type")
	if t.IsArray() {
		for _, e := range t.Array() {
			if e.String() != "null" {
				return e.String()
			}
		}
		return ""
	}
	if t.Exists() {
		return t.String()
	}
	if e := prop.Get("enum.0"); e.Exists() {
		switch e.Type {
		case gjson.Number:
			return "number"
		case gjson.True, gjson.False:
			return "boolean"
		case gjson.String:
			return "string"
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		for _, alt := range prop.Get(k).Array() {
			if t := schemaType(alt); t != "" && t != "null" {
				return t
			}
		}
	}
	return ""
}

// typed converts one value as the property's schema wants it.
func typed(key, v string, prop gjson.Result) (json.RawMessage, error) {
	want := schemaType(prop)
	switch want {
	case "integer":
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return nil, argErrorf("%s wants an integer, not %q; write %s=42", key, v, key)
		}
		return json.RawMessage(v), nil
	case "number":
		if f, err := strconv.ParseFloat(v, 64); err != nil || !json.Valid([]byte(v)) || f != f {
			return nil, argErrorf("%s wants a number, not %q; write %s=1.5", key, v, key)
		}
		return json.RawMessage(v), nil
	case "boolean":
		if v != "true" && v != "false" {
			return nil, argErrorf("%s wants a boolean, not %q; write %s=true or %s=false", key, v, key, key)
		}
		return json.RawMessage(v), nil
	case "array", "object":
		r := gjson.Parse(v)
		if !json.Valid([]byte(v)) || (want == "array") != r.IsArray() || (want == "object") != r.IsObject() {
			example := `'["a","b"]'`
			if want == "object" {
				example = `'{"k":"v"}'`
			}
			return nil, argErrorf("%s wants a JSON %s, not %q; write %s=%s", key, want, v, key, example)
		}
		return json.RawMessage(v), nil
	case "null":
		if v != "null" {
			return nil, argErrorf("%s wants null; write %s=null", key, key)
		}
		return json.RawMessage(v), nil
	}
	if e := prop.Get("enum"); e.IsArray() && want == "string" {
		var allowed []string
		for _, a := range e.Array() {
			allowed = append(allowed, a.String())
		}
		if !slices.Contains(allowed, v) {
			return nil, argErrorf("%s wants one of %s, not %q", key, strings.Join(allowed, ", "), v)
		}
	}
	return json.Marshal(v) // a string, or a property the schema does not type
}

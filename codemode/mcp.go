package codemode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/codegen"
	"github.com/capbridge/capbridge/internal/mcpserver"
)

// DefaultDescriptionBudget caps the run tool's description, which carries
// the surfaces: what does not fit is left to search and describe.
const DefaultDescriptionBudget = 32 << 10

// codegenLang is the façade generator's name for a run language.
var codegenLang = map[string]string{TypeScript: "ts", Python: "python", Go: "go"}

// Tools are the MCP tools `capbridge mcp` serves over r: search, describe
// and run. Their descriptions are written now, from the façades of the
// servers offered, in the first language offered, within budget bytes
// for the run tool's surfaces (0: DefaultDescriptionBudget).
func (r *Runner) Tools(ctx context.Context, budget int) ([]mcpserver.Tool, error) {
	if budget <= 0 {
		budget = DefaultDescriptionBudget
	}
	offered, err := r.Offered(ctx)
	if err != nil {
		return nil, err
	}
	runDesc, err := r.runDescription(ctx, offered, budget)
	if err != nil {
		return nil, err
	}
	langs := r.Languages()
	langEnum, _ := json.Marshal(langs)
	serversEnum, _ := json.Marshal(offered)
	return []mcpserver.Tool{
		{
			Name:  "search",
			Title: "Search the tools a program can call",
			Description: "Find tools of the MCP servers a `run` program can call, by words in their names, descriptions and arguments. " +
				"Each match is one line: score, server, and the call's signature in the language asked (default " + langs[0] + "). " +
				"Use describe for a tool's full declarations.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"query":{"type":"string","description":"words to look for"},` +
				`"servers":{"type":"array","items":{"type":"string","enum":` + string(serversEnum) + `},"description":"the servers to search; all when left out"},` +
				`"language":{"type":"string","enum":` + string(langEnum) + `},` +
				`"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["query"],"additionalProperties":false}`),
			ReadOnly: true,
			Call:     r.searchTool,
		},
		{
			Name:  "describe",
			Title: "Describe tools in full",
			Description: "The full declarations of some of a server's tools (or all of them), in the language asked (default " + langs[0] + "): " +
				"every argument, type and note, with descriptions whole. The run tool's description may abbreviate them.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{` +
				`"server":{"type":"string","enum":` + string(serversEnum) + `},` +
				`"tools":{"type":"array","items":{"type":"string"},"description":"function or tool names; all when left out"},` +
				`"language":{"type":"string","enum":` + string(langEnum) + `}},"required":["server"],"additionalProperties":false}`),
			ReadOnly: true,
			Call:     r.describeTool,
		},
		{
			Name:        "run",
			Title:       "Run a program that calls MCP tools",
			Description: runDesc,
			InputSchema: json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
				`"language":{"type":"string","enum":%s},`+
				`"code":{"type":"string","description":"the program's source"},`+
				`"servers":{"type":"array","items":{"type":"string","enum":%s},"description":"the servers whose façades the program imports; all when left out"},`+
				`"timeout":{"type":"number","exclusiveMinimum":0,"maximum":%d,"description":"seconds the run may take (default %d)"}},`+
				`"required":["language","code"],"additionalProperties":false}`,
				langEnum, serversEnum, int(r.cfg.MaxTimeout/time.Second), int(r.cfg.DefaultTimeout/time.Second))),
			Call: r.runTool,
		},
	}, nil
}

// importLine is how a program imports a server's façade, by language.
func importLine(lang, module string) string {
	switch lang {
	case TypeScript:
		return `import * as ` + module + ` from "./` + module + `.js";`
	case Python:
		return "import " + module
	case Go:
		return `import "` + goModule + "/" + module + `"`
	}
	return ""
}

var (
	tsFunc = regexp.MustCompile(`(?m)^function (\w+)\((\))?`)
	pyFunc = regexp.MustCompile(`(?m)^async def (\w+)\((\))?`)
	goFunc = regexp.MustCompile(`(?m)^func (\w+)\(ctx(\))?`)
)

// example is a complete program in lang calling module's first tool that
// takes no arguments (else its first tool), as the surface declares it.
func example(lang, module, surface string) string {
	re := map[string]*regexp.Regexp{TypeScript: tsFunc, Python: pyFunc, Go: goFunc}[lang]
	if re == nil {
		return ""
	}
	fn, noArgs := "", false
	for _, m := range re.FindAllStringSubmatch(surface, -1) {
		if fn == "" {
			fn = m[1]
		}
		if m[2] != "" {
			fn, noArgs = m[1], true
			break
		}
	}
	if fn == "" {
		return ""
	}
	switch lang {
	case TypeScript:
		args := "{ /* its arguments, as declared */ }"
		if noArgs {
			args = ""
		}
		return importLine(lang, module) + "\n" +
			"const r = await " + module + "." + fn + "(" + args + "); // a rejection is a refusal (capwire.DeniedError)\n" +
			"if (r.is_error) throw new Error(r.text()); // the tool ran and failed\n" +
			"console.log(r.text());\n" +
			"export default r.structured ?? r.text(); // returned as the run's result"
	case Python:
		args := "...  # its arguments, as keywords"
		if noArgs {
			args = ""
		}
		return importLine(lang, module) + "\n" +
			"r = await " + module + "." + fn + "(" + args + ")  # raises capwire.Denied when refused\n" +
			"if r.is_error:\n    raise RuntimeError(r.text())  # the tool ran and failed\n" +
			"print(r.text())\n" +
			"r.structured if r.structured is not None else r.text()  # the last expression is the run's result"
	case Go:
		args := ", " + module + "." + fn + "Args{ /* its arguments, as declared */ }"
		if noArgs {
			args = ""
		}
		return "package main\n\nimport (\n\t\"context\"\n\t\"fmt\"\n\n\t" + importLine(lang, "run")[len("import "):] + "\n\t" + importLine(lang, module)[len("import "):] + "\n)\n\n" +
			"func main() {\n\tr, err := " + module + "." + fn + "(context.Background()" + args + ") // err: refused (*capwire.Denied)\n" +
			"\tif err != nil {\n\t\tpanic(err)\n\t}\n" +
			"\tif r.IsError {\n\t\tpanic(r.Text()) // the tool ran and failed\n\t}\n" +
			"\tfmt.Println(r.Text())\n" +
			"\trun.Return(r.Text()) // the run's result\n}"
	}
	return ""
}

// runDescription writes the run tool's description: what a run is, how
// each language imports and returns, one complete example, then the
// surface of each server in the first language, as long as they fit.
func (r *Runner) runDescription(ctx context.Context, offered []string, budget int) (string, error) {
	langs := r.Languages()
	lang := langs[0]
	cc, err := control.Dial(ctx, r.cfg.Control)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	defer cc.Close()
	var b strings.Builder
	b.WriteString("Run a program in a jail: it calls the tools of MCP servers as typed async functions of generated modules (façades), " +
		"one module per server. Languages: " + strings.Join(langs, ", ") + ". " +
		"The program has no network and no files but a writable /tmp; it reaches only the servers its run names (all by default), " +
		"until it ends or its timeout passes. The result is its exit status, stdout (the first 64 KiB), stderr (the last 8 KiB), " +
		"the value it returns, and the calls it made.\n\n")
	if !r.cfg.AllowDestructive {
		b.WriteString("Destructive tools (labelled destructive below) are refused, not_granted: the operator has not allowed them.\n\n")
	}
	for _, l := range langs {
		switch l {
		case TypeScript:
			b.WriteString("TypeScript (Node, ES module, top-level await): import a server as " + importLine(l, "SERVER") +
				" Calls return a Result: r.text(), r.structured, r.isError, r.content (blocks of every kind). Return a value with `export default value;`.\n")
		case Python:
			b.WriteString("Python 3 (top-level await works): import a server as `" + importLine(l, "SERVER") +
				"`. Calls are async, keyword-only, and return a Result: r.text(), r.structured, r.is_error, r.content (blocks of every kind). " +
				"The value of the last expression (or a variable named result) is returned.\n")
		case Go:
			b.WriteString("Go (package main, built by go run in a module named " + goModule + "; the slowest to start, about half a second): import a server as `" +
				importLine(l, "SERVER") + "`. Calls take a context.Context and an Args struct, and return (*capwire.Result, error): " +
				"r.Text(), r.Decode(&v) for structured content, r.IsError. Return a value with run.Return(v) (" + importLine(l, "run") + ").\n")
		}
	}
	type surf struct{ module, text string }
	var surfaces []surf
	var preamble string
	for _, s := range offered {
		f, err := cc.Facade(ctx, &control.FacadeRequest{Server: s, Lang: codegenLang[lang]})
		if err != nil {
			continue // not ready now; search and describe still name it
		}
		preamble = f.Preamble
		surfaces = append(surfaces, surf{f.Module, f.Surface})
	}
	if len(surfaces) > 0 {
		if ex := example(lang, surfaces[0].module, surfaces[0].text); ex != "" {
			b.WriteString("\nExample (" + lang + "):\n" + ex + "\n")
		}
	}
	b.WriteString("\nThe servers' tools, in " + lang + " (search finds tools by words; describe gives any tool whole, in any language):\n")
	if preamble == "" {
		if p, err := codegen.Preamble(codegen.Lang(codegenLang[lang])); err == nil {
			preamble = p
		}
	}
	b.WriteString(preamble)
	for _, s := range surfaces {
		if b.Len()+len(s.text) > budget {
			fmt.Fprintf(&b, "\n(server %s: its declarations do not fit here; use search and describe, and import it as %s)\n", s.module, importLine(lang, s.module))
			continue
		}
		b.WriteString("\n" + s.text)
	}
	return b.String(), nil
}

func (r *Runner) searchTool(ctx context.Context, args json.RawMessage, _ mcpserver.Progress) (*mcpserver.Result, error) {
	var a struct {
		Query    string   `json:"query"`
		Servers  []string `json:"servers"`
		Language string   `json:"language"`
		Limit    uint32   `json:"limit"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("%w: %v", mcpserver.ErrBadParams, err)
	}
	lang, err := r.language(a.Language)
	if err != nil {
		return nil, err
	}
	if len(a.Servers) == 0 {
		if a.Servers, err = r.Offered(ctx); err != nil {
			return nil, err
		}
	} else if a.Servers, err = r.servers(ctx, a.Servers); err != nil {
		return nil, fmt.Errorf("%w: %v", mcpserver.ErrBadParams, err)
	}
	cc, err := control.Dial(ctx, r.cfg.Control)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	found, err := cc.Search(ctx, &control.SearchRequest{Servers: a.Servers, Query: a.Query, Limit: a.Limit, Lang: codegenLang[lang]})
	if err != nil {
		return toolError(err), nil
	}
	var b strings.Builder
	for _, m := range found.Matches {
		fmt.Fprintf(&b, "%d %s %s\n", m.Score, m.Server, m.Signature)
	}
	if b.Len() == 0 {
		b.WriteString("no tool matches\n")
	}
	return &mcpserver.Result{Text: b.String(), Structured: map[string]any{"matches": found.Matches}}, nil
}

func (r *Runner) describeTool(ctx context.Context, args json.RawMessage, _ mcpserver.Progress) (*mcpserver.Result, error) {
	var a struct {
		Server   string   `json:"server"`
		Tools    []string `json:"tools"`
		Language string   `json:"language"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("%w: %v", mcpserver.ErrBadParams, err)
	}
	lang, err := r.language(a.Language)
	if err != nil {
		return nil, err
	}
	if _, err := r.servers(ctx, []string{a.Server}); err != nil {
		return toolError(err), nil
	}
	cc, err := control.Dial(ctx, r.cfg.Control)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	d, err := cc.Describe(ctx, &control.DescribeRequest{Server: a.Server, Tools: a.Tools, Lang: codegenLang[lang]})
	if err != nil {
		return toolError(err), nil
	}
	return &mcpserver.Result{Text: "// " + importLine(lang, d.Module) + "\n" + d.Declarations}, nil
}

// language resolves a requested language ("" is the first offered).
func (r *Runner) language(l string) (string, error) {
	if l == "" {
		return r.langs[0], nil
	}
	if _, ok := r.runtime[l]; !ok {
		return "", fmt.Errorf("%w: language %q is not offered (offered: %s)", mcpserver.ErrBadParams, l, strings.Join(r.langs, ", "))
	}
	return l, nil
}

func (r *Runner) runTool(ctx context.Context, args json.RawMessage, progress mcpserver.Progress) (*mcpserver.Result, error) {
	var a struct {
		Language string   `json:"language"`
		Code     string   `json:"code"`
		Servers  []string `json:"servers"`
		Timeout  float64  `json:"timeout"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return nil, fmt.Errorf("%w: %v", mcpserver.ErrBadParams, err)
	}
	req := Request{Language: a.Language, Code: a.Code, Servers: a.Servers, Timeout: time.Duration(a.Timeout * float64(time.Second))}
	if req.Timeout <= 0 {
		req.Timeout = r.cfg.DefaultTimeout
	}
	// Progress while the run lasts: elapsed seconds of the timeout, every
	// second, so a host can show it and keep its own timer alive.
	done := make(chan struct{})
	ticker := time.NewTicker(time.Second)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		defer ticker.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-ticker.C:
				el := time.Since(start)
				progress(el.Seconds(), req.Timeout.Seconds(), fmt.Sprintf("running for %s", el.Round(time.Second)))
			}
		}
	}()
	res, err := r.Run(ctx, req)
	close(done)
	<-stopped
	if errors.Is(err, ErrBadRequest) {
		return toolError(err), nil
	}
	if err != nil {
		return toolError(err), nil
	}
	return &mcpserver.Result{Text: res.Summary(), Structured: res, IsError: !res.OK()}, nil
}

// Summary is the run's result as text for a model: how it ended, what it
// returned and printed, and its accounting.
func (res *Result) Summary() string {
	var b strings.Builder
	switch res.Ended {
	case "exit":
		fmt.Fprintf(&b, "exit %d", res.ExitCode)
		if res.Signal != "" {
			fmt.Fprintf(&b, " (%s)", res.Signal)
		}
	case "wall_clock":
		b.WriteString("killed: the timeout passed")
	case "output_limit":
		b.WriteString("killed: it printed too much")
	default:
		b.WriteString(res.Ended)
	}
	fmt.Fprintf(&b, "; %d ms; %d calls", res.TookMS, res.Calls)
	if res.Denied > 0 {
		fmt.Fprintf(&b, " (%d refused)", res.Denied)
	}
	b.WriteString("\n")
	if len(res.Value) > 0 {
		b.WriteString("result: " + string(res.Value) + "\n")
	}
	if res.Stdout != "" {
		b.WriteString("stdout:\n" + res.Stdout)
		if int64(len(res.Stdout)) < res.StdoutBytes {
			fmt.Fprintf(&b, "\n[… %d more bytes]", res.StdoutBytes-int64(len(res.Stdout)))
		}
		b.WriteString("\n")
	}
	if res.Stderr != "" {
		b.WriteString("stderr:\n" + res.Stderr + "\n")
	}
	return b.String()
}

// toolError is a failure reported to the model as the tool's result.
func toolError(err error) *mcpserver.Result {
	return &mcpserver.Result{Text: strings.TrimPrefix(err.Error(), "codemode: "), IsError: true}
}

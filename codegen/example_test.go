package codegen_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/capbridge/capbridge/codegen"
)

// listing is a saved tools/list result of a small issue tracker: one tool
// takes an enum, the other declares a structured output.
const listing = `{"tools": [
  {"name": "create_issue", "description": "Open a new issue.",
   "inputSchema": {"type": "object", "required": ["repo", "title"], "properties": {
     "repo": {"type": "string", "description": "owner/name"},
     "title": {"type": "string"},
     "state": {"enum": ["open", "closed"]}}}},
  {"name": "get_user", "description": "Look a user up by login.",
   "annotations": {"readOnlyHint": true},
   "inputSchema": {"type": "object", "required": ["login"], "properties": {
     "login": {"type": "string"}}},
   "outputSchema": {"type": "object", "required": ["id"], "properties": {
     "id": {"type": "integer"}, "name": {"type": "string"}}}}
]}`

// tools is listing parsed, as every example but ParseListing's starts.
func tools() []codegen.Tool {
	t, err := codegen.ParseListing([]byte(listing))
	if err != nil {
		panic(err)
	}
	return t
}

// printLines prints the lines of s that begin with one of prefixes: the
// declarations of a façade, without its comments and bodies.
func printLines(s string, prefixes ...string) {
	for l := range strings.Lines(s) {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				fmt.Print(l)
				break
			}
		}
	}
}

func ExampleParseListing() {
	tools, err := codegen.ParseListing([]byte(listing))
	if err != nil {
		panic(err)
	}
	for _, t := range tools {
		fmt.Println(t.Name, "output schema:", t.OutputSchema != nil)
	}
	// A bare array of tools is a listing too.
	tools, err = codegen.ParseListing([]byte(`[{"name": "ping", "inputSchema": {"type": "object"}}]`))
	fmt.Println(len(tools), err)
	// A malformed tool refuses the listing, and the error names it.
	_, err = codegen.ParseListing([]byte(`{"tools": [{"name": "ping", "inputSchema": {"type": "object"}}, {"inputSchema": {}}]}`))
	var le *codegen.ListingError
	fmt.Println(errors.Is(err, codegen.ErrBadListing), errors.As(err, &le) && le.Index == 1)
	// Output:
	// create_issue output schema: false
	// get_user output schema: true
	// 1 <nil>
	// true true
}

func ExampleGenerate() {
	g, err := codegen.Generate("github", tools(), codegen.Options{})
	if err != nil {
		panic(err)
	}
	fmt.Println(g.ModuleName, g.Lang, g.Level)
	printLines(string(g.Source), "package ", "func ")
	fmt.Print(g.Surface)
	// Output:
	// github go full
	// package github
	// func CreateIssue(ctx context.Context, args CreateIssueArgs) (*capwire.Result, error) {
	// func GetUser(ctx context.Context, args GetUserArgs) (*capwire.Result, error) {
	// func DecodeGetUser(r *capwire.Result) (GetUserOutput, error) {
	// // package github, 2 tools
	// func CreateIssue(ctx, CreateIssueArgs{ // "Open a new issue."
	// 	Repo string // "owner/name"
	// 	Title string
	// 	State *CreateIssueState // "open"|"closed"
	// })
	// func GetUser(ctx, GetUserArgs{Login string}) // "Look a user up by login."
	// type GetUserOutput struct{ Id int64; Name *string }
}

func ExampleGenerate_typeScript() {
	g, err := codegen.Generate("github", tools(), codegen.Options{Lang: codegen.TypeScript})
	if err != nil {
		panic(err)
	}
	printLines(string(g.Source), "import ", "export ")
	fmt.Print(g.Surface)
	// Output:
	// import * as capwire from "@capbridge/capwire";
	// export async function createIssue(args: CreateIssueArgs, opts?: capwire.CallOptions): Promise<capwire.Result> {
	// export interface CreateIssueArgs {
	// export type CreateIssueState = "open" | "closed";
	// export async function getUser(args: GetUserArgs, opts?: capwire.CallOptions): Promise<capwire.Result> {
	// export function decodeGetUser(r: capwire.Result): GetUserOutput {
	// export interface GetUserArgs {
	// export interface GetUserOutput {
	// // module github, 2 tools
	// function createIssue({ // "Open a new issue."
	// 	repo: string // "owner/name"
	// 	title: string
	// 	state?: "open"|"closed"
	// })
	// function getUser({ login: string }) // "Look a user up by login."
	// interface GetUserOutput { id: number; name?: string }
}

func ExampleGenerate_python() {
	g, err := codegen.Generate("github", tools(), codegen.Options{Lang: codegen.Python})
	if err != nil {
		panic(err)
	}
	printLines(string(g.Source), "import ", "async def ", "def ", "class ")
	fmt.Print(g.Surface)
	// Output:
	// import typing
	// import capwire
	// async def create_issue(
	// async def get_user(
	// def decode_get_user(r: capwire.Result) -> "GetUserOutput":
	// class _GetUserOutputRequired(typing.TypedDict):
	// class GetUserOutput(_GetUserOutputRequired, total=False):
	// # module github, 2 tools
	// async def create_issue(*, # "Open a new issue."
	//     repo: str, # "owner/name"
	//     title: str,
	//     state: Literal["open", "closed"] = ...,
	// )
	// async def get_user(*, login: str) # "Look a user up by login."
	// class GetUserOutput(TypedDict): id: int; name: NotRequired[str]
}

// A surface larger than Options.SurfaceBudget steps down the ladder: short
// descriptions, declarations only, then an index of the tools in pages of
// at most the budget. Describe and Search serve what a rung leaves out.
func ExampleGenerate_surfaceBudget() {
	var g *codegen.Generated
	for _, budget := range []int{0, 300, 200, 100} {
		var err error
		g, err = codegen.Generate("github", tools(), codegen.Options{SurfaceBudget: budget})
		if err != nil {
			panic(err)
		}
		fmt.Printf("budget %d: %s, %d bytes, %d pages\n", budget, g.Level, len(g.Surface), len(g.Pages))
	}
	fmt.Print(strings.Join(g.Pages, ""))
	// Output:
	// budget 0: full, 306 bytes, 0 pages
	// budget 300: signatures, 249 bytes, 0 pages
	// budget 200: index, 119 bytes, 1 pages
	// budget 100: index, 81 bytes, 2 pages
	// // package github, 2 tools; index page 1 of 2
	// CreateIssue // "Open a new issue."
	// // package github, 2 tools; index page 2 of 2
	// GetUser // "Look a user up by login."
}

// Generate refuses what it cannot make a façade of with an error that
// matches one of the package's Err variables.
func ExampleGenerate_errors() {
	twice := append(tools(), tools()[0])
	_, err := codegen.Generate("github", twice, codegen.Options{})
	var c *codegen.CollisionError
	if errors.As(err, &c) {
		fmt.Println(errors.Is(err, codegen.ErrNameCollision), c.A, c.B, c.Ident)
	}
	_, err = codegen.Generate("", tools(), codegen.Options{})
	fmt.Println(errors.Is(err, codegen.ErrBadServerName))
	_, err = codegen.Generate("github", tools(), codegen.Options{Lang: "rust"})
	fmt.Println(errors.Is(err, codegen.ErrUnsupportedLang))
	// Output:
	// true create_issue create_issue CreateIssue_e748d993
	// true
	// true
}

// The preamble is printed once, before the surfaces of however many
// servers follow.
func ExamplePreamble() {
	for _, lang := range []codegen.Lang{codegen.Go, codegen.TypeScript, codegen.Python} {
		pre, err := codegen.Preamble(lang)
		if err != nil {
			panic(err)
		}
		first, _, _ := strings.Cut(pre, ":")
		fmt.Printf("%s: %d lines, %s\n", lang, strings.Count(pre, "\n"), first)
	}
	// Output:
	// go: 9 lines, // MCP tools as Go packages
	// ts: 9 lines, // MCP tools as TypeScript modules
	// python: 9 lines, # MCP tools as Python modules
}

func ExampleGenerated_Describe() {
	g, err := codegen.Generate("github", tools(), codegen.Options{})
	if err != nil {
		panic(err)
	}
	d, err := g.Describe("get_user") // or "GetUser"
	if err != nil {
		panic(err)
	}
	fmt.Print(d)
	_, err = g.Describe("delete_repo")
	fmt.Println(errors.Is(err, codegen.ErrNoSuchTool))
	// Output:
	// func GetUser(ctx, GetUserArgs{Login string}) // tool "get_user", "Look a user up by login."
	// type GetUserOutput struct{ Id int64; Name *string }
	// true
}

func ExampleGenerated_Search() {
	g, err := codegen.Generate("github", tools(), codegen.Options{})
	if err != nil {
		panic(err)
	}
	for _, m := range g.Search("user login", 5) {
		fmt.Println(m.Func, m.Tool, m.Score)
		fmt.Println(m.Signature)
	}
	// Output:
	// GetUser get_user 8
	// github.GetUser(ctx, github.GetUserArgs{Login string})
}

// The bridge generates Go at boot, and another language's façade of the
// same listing when a sandbox asks for it.
func ExampleGenerated_In() {
	g, err := codegen.Generate("github", tools(), codegen.Options{})
	if err != nil {
		panic(err)
	}
	py, err := g.In(codegen.Python)
	if err != nil {
		panic(err)
	}
	again, _ := g.In(codegen.Python)
	fmt.Println(py.Lang, py.ModuleName, py.ListingSHA256 == g.ListingSHA256, again == py)
	printLines(py.Surface, "async def ")
	// Output:
	// python github true true
	// async def create_issue(*, # "Open a new issue."
	// async def get_user(*, login: str) # "Look a user up by login."
}

package bridge

import (
	"errors"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/codegen"
	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// facade, describe and search answer in TypeScript and Python from the
// listing the bridge read at boot, each with its own preamble.
func TestControlLanguages(t *testing.T) {
	defer leakcheck.Check(t)()
	tb := startBridge(t, nil, mcptestServer("t", mcptest.Scenario{}), brokenServer("broken"))
	cc := tb.control()
	ctx := ctlCtx(t)
	for _, tc := range []struct {
		lang      codegen.Lang
		source    string // a line of the echo tool's function
		decl, sig string
	}{
		{codegen.TypeScript, "export async function echo(args: EchoArgs, opts?: capwire.CallOptions)", "function echo({ text: string })", "t.echo({ text: string })"},
		{codegen.Python, "async def echo(", "async def echo(*, text: str)", "t.echo(*, text: str)"},
	} {
		f, err := cc.Facade(ctx, &control.FacadeRequest{Server: "t", Lang: string(tc.lang)})
		want, _ := codegen.Preamble(tc.lang)
		if err != nil || f.Preamble != want || !strings.Contains(f.Source, tc.source) || f.ListingSHA256 != tb.srv("t").current().gen.ListingSHA256 {
			t.Fatalf("%s facade: %v\n%s", tc.lang, err, f.Source)
		}
		d, err := cc.Describe(ctx, &control.DescribeRequest{Server: "t", Tools: []string{"echo"}, Lang: string(tc.lang)})
		if err != nil || !strings.HasPrefix(d.Declarations, tc.decl) {
			t.Errorf("%s describe: %v\n%s", tc.lang, err, d.Declarations)
		}
		found, err := cc.Search(ctx, &control.SearchRequest{Query: "echo", Lang: string(tc.lang)})
		if err != nil || len(found.Matches) == 0 || found.Matches[0].Signature != tc.sig {
			t.Errorf("%s search: %+v, %v", tc.lang, found, err)
		}
	}
	if _, err := cc.Search(ctx, &control.SearchRequest{Query: "echo", Lang: "cobol"}); !errors.Is(err, &control.Error{Code: control.CodeBadRequest}) {
		t.Errorf("search in cobol: %v", err)
	}
	cc.Close()
	tb.shutdown()
}

package codemode

import (
	"errors"
	"fmt"
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// StripTypes compiles a TypeScript module to JavaScript that the
// installed Node runs (ES2022, an ES module), by esbuild's transform: types
// are removed and TypeScript's own syntax (enums, parameter properties)
// lowered; nothing is bundled, so imports stay as written. It is the
// jail's Transformer for TypeScript: it runs inside the jail, on the
// program's text. An error names each problem by file, line and column,
// as a compiler would.
func StripTypes(name string, src []byte) ([]byte, error) {
	res := api.Transform(string(src), api.TransformOptions{
		Loader:     api.LoaderTS,
		Format:     api.FormatESModule,
		Target:     api.ES2022,
		Sourcefile: name,
		LogLevel:   api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		var b strings.Builder
		for i, m := range res.Errors {
			if i == 10 {
				fmt.Fprintf(&b, "… and %d more errors\n", len(res.Errors)-i)
				break
			}
			if m.Location != nil {
				fmt.Fprintf(&b, "%s:%d:%d: error: %s\n", m.Location.File, m.Location.Line, m.Location.Column+1, m.Text)
				if m.Location.LineText != "" {
					fmt.Fprintf(&b, "    %s\n", m.Location.LineText)
				}
			} else {
				fmt.Fprintf(&b, "%s: error: %s\n", name, m.Text)
			}
		}
		return nil, errors.New(strings.TrimRight(b.String(), "\n"))
	}
	return res.Code, nil
}

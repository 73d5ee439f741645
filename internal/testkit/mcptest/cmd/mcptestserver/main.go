// Command mcptestserver runs the capbridge test MCP server on stdin/stdout
// for manual use: mcptestserver -scenario FILE, or -scenario-json TEXT, or
// neither for the well-behaved default. See docs/mcptest.md.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

func main() {
	// Serves at once when started by mcptest.Command's protocol, and runs
	// the grandchild of the grandchild scenario (this binary, re-executed).
	mcptest.MaybeServe()

	file := flag.String("scenario", "", "read the scenario from this JSON `file`")
	text := flag.String("scenario-json", "", "the scenario as JSON `text`")
	flag.Parse()
	if flag.NArg() > 0 || (*file != "" && *text != "") {
		fmt.Fprintln(os.Stderr, "usage: mcptestserver [-scenario FILE | -scenario-json TEXT]")
		os.Exit(2)
	}
	data := []byte(*text)
	if *file != "" {
		var err error
		if data, err = os.ReadFile(*file); err != nil {
			fmt.Fprintln(os.Stderr, "mcptestserver:", err)
			os.Exit(2)
		}
	}
	var sc mcptest.Scenario
	if len(data) > 0 {
		var err error
		if sc, err = mcptest.ParseScenario(data); err != nil {
			fmt.Fprintln(os.Stderr, "mcptestserver:", err)
			os.Exit(2)
		}
	}
	mcptest.Main(sc)
}

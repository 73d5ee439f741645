package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/capbridge/capbridge/codemode"
)

func runRun(args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("run", "capbridge run [--lang typescript|python|go] [-c capbridge.toml | --attach CONTROL] [flags] FILE|-", `
Run one program in the jail, as capbridge mcp's run tool does: the façades
of the servers it may reach are importable (TypeScript: import * as m from
"./m.js"; Python: import m; Go: import "mcp/m"), under a grant for this run alone. It prints
the program's stdout and stderr as they were kept, and exits with its exit
status (--json: the whole result, accounting included, as JSON).`)
	ff := addFrontFlags(fs)
	lang := fs.String("lang", "", "the program's language (default: from FILE's extension, .ts, .py or .go)")
	asJSON := fs.Bool("json", false, "print the run's result as JSON")
	pos, code, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return fs.usageError(stderr, "give one program file, or - for stdin")
	}
	var src []byte
	var err error
	if pos[0] == "-" {
		src, err = io.ReadAll(io.LimitReader(os.Stdin, codemode.MaxCode+1))
	} else {
		src, err = os.ReadFile(pos[0])
	}
	if err != nil {
		fmt.Fprintln(stderr, "capbridge run:", err)
		return exitError
	}
	if *lang == "" {
		switch {
		case strings.HasSuffix(pos[0], ".ts"):
			*lang = codemode.TypeScript
		case strings.HasSuffix(pos[0], ".py"):
			*lang = codemode.Python
		case strings.HasSuffix(pos[0], ".go"):
			*lang = codemode.Go
		default:
			return fs.usageError(stderr, "say --lang: %q does not end in .ts, .py or .go", pos[0])
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ff.languages = *lang
	// One program: a warm jail would be started only to be thrown away.
	ff.warm = 0
	f, code := ff.start(ctx, stderr)
	if f == nil {
		return code
	}
	defer f.close()
	res, err := f.runner.Run(ctx, codemode.Request{Language: *lang, Code: string(src), Timeout: ff.timeout})
	if err != nil {
		fmt.Fprintln(stderr, "capbridge run:", err)
		return exitError
	}
	if *asJSON {
		out, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintf(stdout, "%s\n", out)
	} else {
		io.WriteString(stdout, res.Stdout)
		io.WriteString(stderr, res.Stderr)
		if len(res.Value) > 0 {
			fmt.Fprintf(stderr, "capbridge run: returned %s\n", res.Value)
		}
		if res.Ended != "exit" {
			fmt.Fprintf(stderr, "capbridge run: %s\n", res.Ended)
		}
	}
	if res.ExitCode < 0 || res.Ended != "exit" {
		return 128 + 9
	}
	return res.ExitCode
}

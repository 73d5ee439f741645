package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/control"
	"github.com/capbridge/capbridge/internal/inert"
)

// cmdFlags is a command's flag set with the text its help prints. Every
// command parses with it, so that --help, -h and `capbridge help CMD`
// print the same help on stdout and exit 0, flags may follow positional
// arguments, and a wrong command line says how to get the help.
// flagGiven reports whether the command line set the flag name, as
// opposed to leaving its default.
func flagGiven(fs *cmdFlags, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

type cmdFlags struct {
	*flag.FlagSet
	usage string // "capbridge call [flags] SERVER TOOL [ARG...]"
	about string // what the command does, one paragraph or more
}

func newCmdFlags(name, usage, about string) *cmdFlags {
	fs := flag.NewFlagSet("capbridge "+name, flag.ContinueOnError)
	fs.Usage = func() {} // parse prints the help itself, on stdout
	return &cmdFlags{FlagSet: fs, usage: usage, about: about}
}

// help prints the usage line, the description and the flags.
func (c *cmdFlags) help(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usage, strings.TrimSpace(c.about))
	n := 0
	c.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
		c.SetOutput(w)
		c.PrintDefaults()
	}
}

// parse parses args, flags and positional arguments in any order ("--"
// ends the flags), and returns the positional ones. When it returns
// ok=false the command must exit with code: 0 after --help, 2 after a
// flag error (which it has reported).
func (c *cmdFlags) parse(args []string, stdout, stderr io.Writer) (pos []string, code int, ok bool) {
	c.SetOutput(stderr)
	for {
		err := c.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			c.help(stdout)
			return nil, exitOK, false
		}
		if err != nil {
			fmt.Fprintf(stderr, "run `capbridge help %s` for its usage\n", c.cmd())
			return nil, exitUsage, false
		}
		rest := c.Args()
		if len(rest) == 0 {
			return pos, exitOK, true
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), exitOK, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func (c *cmdFlags) cmd() string { return strings.TrimPrefix(c.Name(), "capbridge ") }

// usageError reports a wrong command line: what is wrong, the usage line
// and where the help is. It returns exitUsage.
func (c *cmdFlags) usageError(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\nusage: %s\nrun `capbridge help %s` for more\n", c.Name(), fmt.Sprintf(format, args...), c.usage, c.cmd())
	return exitUsage
}

// The client commands talk to a running `capbridge serve` through its
// control socket, found in this order: --control PATH; -c FILE (the
// control_socket of that capbridge.toml, read with serve's parser);
// $CAPBRIDGE_CONTROL; the path serve uses when its config names none
// ($XDG_RUNTIME_DIR/capbridge/control.sock, else
// /tmp/capbridge-$UID/control.sock).

// envControl names the environment variable that points the client
// commands at a control socket.
const envControl = "CAPBRIDGE_CONTROL"

// clientFlags are the flags every client command shares.
type clientFlags struct {
	control string
	config  string
	timeout time.Duration
	json    bool
}

// addClientFlags registers the shared flags on fs; withJSON adds --json.
func addClientFlags(fs *cmdFlags, withJSON bool) *clientFlags {
	cf := &clientFlags{}
	fs.StringVar(&cf.control, "control", "", "the control socket of the running capbridge (default: from -c, $"+envControl+", or serve's default)")
	fs.StringVar(&cf.config, "c", "", "a capbridge.toml whose control_socket to use")
	fs.DurationVar(&cf.timeout, "timeout", 60*time.Second, "give up after this long")
	if withJSON {
		fs.BoolVar(&cf.json, "json", false, "print the reply as JSON, for scripts")
	}
	return cf
}

// socket returns the control socket's path, how it was chosen, and
// whether the user named it (with --control, -c or $CAPBRIDGE_CONTROL)
// rather than left it to the default.
func (cf *clientFlags) socket() (path, how string, named bool, err error) {
	switch {
	case cf.control != "":
		return cf.control, "from --control", true, nil
	case cf.config != "":
		data, err := readBounded(cf.config)
		if err != nil {
			return "", "", false, err
		}
		cfg, err := config.Load(cf.config, data)
		if err != nil {
			return "", "", false, err
		}
		if cfg.Bridge.ControlSocket != "" {
			return cfg.Bridge.ControlSocket, "from " + cf.config, true, nil
		}
		return defaultControl(), "the default, as " + cf.config + " names no control_socket", false, nil
	case os.Getenv(envControl) != "":
		return os.Getenv(envControl), "from $" + envControl, true, nil
	}
	return defaultControl(), "the default", false, nil
}

func defaultControl() string {
	_, control := config.DefaultSockets(os.Getenv("XDG_RUNTIME_DIR"), os.Getuid())
	return control
}

// withControl dials the control socket and runs one request on it, the
// whole exchange bounded by --timeout.
func withControl[R any](cf *clientFlags, request func(context.Context, *control.Client) (R, error)) (R, error) {
	var zero R
	path, how, named, err := cf.socket()
	if err != nil {
		return zero, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cf.timeout)
	defer cancel()
	dial := control.DialOwn // a default path may be another user's
	if named {
		dial = control.Dial
	}
	c, err := dial(ctx, path)
	if err != nil {
		return zero, dialError(path, how, err)
	}
	defer c.Close()
	return request(ctx, c)
}

// dialError says which socket was tried, why that one, and what to do.
func dialError(path, how string, err error) error {
	if ue, ok := errors.AsType[*control.UntrustedError](err); ok {
		return fmt.Errorf("will not use %s (%s): %s; nothing was sent to it. Remove it if it is not yours, or name the socket you mean with --control PATH, -c capbridge.toml or $%s", path, how, ue.Reason, envControl)
	}
	next := "start it with `capbridge serve`, or name its socket with --control PATH, -c capbridge.toml or $" + envControl
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		next = "nothing listens there (a capbridge that stopped left it); " + next
	case errors.Is(err, syscall.EACCES):
		next = "the control socket is its owner's alone: run this as the user capbridge runs as"
	case errors.Is(err, context.DeadlineExceeded):
		next = "raise --timeout, or check that capbridge is not stuck (`capbridge status`)"
	}
	cause := err
	if u := errors.Unwrap(err); u != nil {
		cause = u
	}
	return fmt.Errorf("cannot reach capbridge at %s (%s): %v; %s", path, how, cause, next)
}

// explain returns err's message with what to do next, for an error a
// client command prints.
func explain(err error) string {
	msg := inert.Line(err.Error()) // it may quote a server
	var ce *control.Error
	if !errors.As(err, &ce) {
		if errors.Is(err, context.DeadlineExceeded) {
			return msg + "; raise --timeout"
		}
		return msg
	}
	hint := map[string]string{
		control.CodeUnknownServer: "`capbridge status` lists the configured servers",
		control.CodeUnknownTool:   "`capbridge tools SERVER` lists its tools",
		control.CodeUnavailable:   "`capbridge status` shows why; fix the server and restart capbridge",
		control.CodeTooManyGrants: "revoke grants that are no longer needed (`capbridge revoke ID`) or wait for them to expire",
		control.CodeTooLarge:      "ask for less (name fewer tools)",
		control.CodeBadRequest:    "check the arguments against `capbridge help`",
		control.CodeInternal:      "capbridge's log has the details",
	}[ce.Code]
	if hint == "" {
		return msg
	}
	return msg + "; " + hint
}

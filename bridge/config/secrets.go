package config

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/capbridge/capbridge/internal/regular"
)

// Secrets come from where operators keep them. A server's env values and
// header values may reference them:
//
//	env     = { GITHUB_TOKEN = "${cmd:op read op://ci/github/token}" }
//	headers = { "X-Api-Key" = "${file:/run/secrets/linear-key}" }
//	env     = { DB_URL = "postgres://app:${env:DB_PASSWORD}@db/app" }
//
// Load and LoadEditor check each reference's form and keep the value as
// written (a Ref); ResolveSecrets reads the files, runs the commands and
// looks the variables up, once, and records each resolved value so that
// capbridge redacts it wherever it writes. A value is expanded in one
// pass from the text as written: what a file or a variable holds is
// never expanded again, so a secret that happens to contain "${cmd:…}"
// runs nothing.

// SecretSources is where ResolveSecrets reads secrets: the process's
// environment, files and commands (package main wires the real ones; a
// test, its own).
//
// A source left nil resolves nothing: a reference that needs it is
// unresolved, and says so.
type SecretSources struct {
	LookupEnv func(string) (string, bool)
	// ReadFile reads a file of at most MaxSecret bytes (ReadSecretFile).
	ReadFile func(path string) ([]byte, error)
	// Run runs argv without a shell, stdin empty, within ctx, and returns
	// its stdout (at most MaxSecret+1 bytes); an error says how it
	// failed (its exit status and the start of its stderr).
	Run func(ctx context.Context, argv []string) ([]byte, error)
}

// fill gives each source left nil one that resolves nothing.
func (src *SecretSources) fill() {
	none := errors.New("capbridge was given no way to resolve such a reference here")
	if src.LookupEnv == nil {
		src.LookupEnv = func(string) (string, bool) { return "", false }
	}
	if src.ReadFile == nil {
		src.ReadFile = func(string) ([]byte, error) { return nil, none }
	}
	if src.Run == nil {
		src.Run = func(context.Context, []string) ([]byte, error) { return nil, none }
	}
}

// ReadSecretFile reads the secret in the file at path: a regular file of
// at most MaxSecret bytes, opened without waiting (regular.ReadFile).
func ReadSecretFile(path string) ([]byte, error) { return regular.ReadFile(path, MaxSecret) }

// Bounds of a secret reference.
const (
	// MaxSecret is the most a file or command may yield: a token, a key,
	// a certificate; more is a mistake (a device, a log file).
	MaxSecret = 64 << 10
	// SecretTimeout bounds each command (a password manager that waits
	// for a person to unlock it, an agent that is not running).
	SecretTimeout = 10 * time.Second
	// SecretsTimeout bounds the commands of one resolution together: a
	// password manager that waits for its unlock would otherwise hold a
	// boot or a reload for SecretTimeout per reference, one after
	// another (64 servers, over ten minutes).
	SecretsTimeout = 30 * time.Second
	// minSecret is the shortest resolved value recorded for redaction:
	// redacting "1" or "yes" everywhere would garble logs and hide
	// nothing (the same bound as the redactor's).
	minSecret = 4
)

// Ref is one env or header value that holds placeholders, kept as
// written until ResolveSecrets expands it.
type Ref struct {
	Key      string // "env.NAME" or "headers.NAME"
	Template string
	Line     int
}

// secretRef reports whether a placeholder's body is a secret reference,
// and which: "file" or "cmd", with its argument.
func secretRef(body string) (kind, arg string, ok bool) {
	for _, k := range []string{"file", "cmd"} {
		if a, ok := strings.CutPrefix(body, k+":"); ok {
			return k, a, true
		}
	}
	return "", "", false
}

// secret resolves ${file:PATH} or ${cmd:…}.
func (x *expander) secret(ph, kind, arg string) (string, *unresolved) {
	if strings.Contains(arg, "${") {
		return "", &unresolved{placeholder: ph, msg: fmt.Sprintf("%s holds a placeholder; a reference is taken as written", ph), fix: "write the path or command without ${…}"}
	}
	switch kind {
	case "file":
		if arg == "" {
			return "", &unresolved{placeholder: ph, msg: "${file:} names no file", fix: "write ${file:/run/secrets/NAME}"}
		}
		if x.dry {
			return "", nil
		}
		path := arg
		if !filepath.IsAbs(path) {
			path = filepath.Join(x.dir, path)
		}
		b, err := x.src.ReadFile(path)
		if err != nil {
			return "", &unresolved{placeholder: ph, msg: fmt.Sprintf("cannot read %s: %v", path, unwrapPath(err)), fix: "check the path, and that capbridge's user may read it"}
		}
		return secretText(ph, "file "+path, b)
	default:
		argv, err := splitArgv(arg)
		if err != nil {
			return "", &unresolved{placeholder: ph, msg: fmt.Sprintf("%s: %v", ph, err), fix: `write the program and its arguments separated by spaces, quoting an argument that holds spaces with "…" or '…'`}
		}
		if x.dry {
			return "", nil
		}
		r := x.runs.run(x.src, arg, argv)
		if r.err != nil {
			return "", &unresolved{placeholder: ph, msg: fmt.Sprintf("command %s failed: %v", argv[0], r.err), fix: r.fix}
		}
		return secretText(ph, "command "+argv[0], r.out)
	}
}

// secretRuns are the commands one resolution ran, by their text: a
// command named by several references runs once, and all of them share
// one deadline (SecretsTimeout). For one goroutine.
type secretRuns struct {
	deadline time.Time
	ran      map[string]secretRun
}

// secretRun is what one command gave: its output, or why it failed and
// the fix.
type secretRun struct {
	out []byte
	err error
	fix string
}

func newSecretRuns() *secretRuns {
	return &secretRuns{deadline: time.Now().Add(SecretsTimeout), ran: map[string]secretRun{}}
}

// run runs argv (the command's text is cmd), within SecretTimeout and
// what is left of the resolution's SecretsTimeout, or returns what it
// gave before.
func (rs *secretRuns) run(src *SecretSources, cmd string, argv []string) secretRun {
	if r, ok := rs.ran[cmd]; ok {
		return r
	}
	var r secretRun
	if !time.Now().Before(rs.deadline) {
		r.err = fmt.Errorf("not run: the secret commands before it took the %s they may take together", SecretsTimeout)
		r.fix = "unlock the password manager, or start its agent, before capbridge; check the commands that did not finish in time"
		rs.ran[cmd] = r
		return r
	}
	dl := time.Now().Add(SecretTimeout)
	if rs.deadline.Before(dl) {
		dl = rs.deadline
	}
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	r.out, r.err = src.Run(ctx, argv)
	if r.err != nil {
		r.fix = "run the command by hand as capbridge's user to see why"
		if ctx.Err() != nil {
			r.fix = fmt.Sprintf("it must print the secret within %s, without waiting for input (unlock the password manager, or start its agent, before capbridge)", SecretTimeout)
		}
	}
	rs.ran[cmd] = r
	return r
}

// secretText is a file's or command's output as a value: valid UTF-8, at
// most MaxSecret bytes, one trailing newline dropped.
func secretText(ph, what string, b []byte) (string, *unresolved) {
	switch {
	case len(b) > MaxSecret:
		return "", &unresolved{placeholder: ph, msg: fmt.Sprintf("%s yields more than %d bytes", what, MaxSecret), fix: "point it at the secret alone"}
	case !utf8.Valid(b):
		return "", &unresolved{placeholder: ph, msg: what + " yields bytes that are not UTF-8", fix: "store the secret as text (base64 it if it is binary)"}
	}
	v := strings.TrimSuffix(string(b), "\n")
	return strings.TrimSuffix(v, "\r"), nil
}

// unwrapPath drops the path an *os.PathError repeats.
func unwrapPath(err error) error {
	type pathErr interface{ Unwrap() error }
	if pe, ok := err.(pathErr); ok && pe.Unwrap() != nil && strings.Contains(err.Error(), "open ") {
		return pe.Unwrap()
	}
	return err
}

// splitArgv splits a command into words at spaces and tabs; "…" and '…'
// group words with spaces in them, and nothing else is special: no
// variables, globs or escapes, since no shell runs it.
func splitArgv(s string) ([]string, error) {
	var argv []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\'':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return nil, fmt.Errorf("an unterminated %c", c)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				argv = append(argv, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		argv = append(argv, cur.String())
	}
	if len(argv) == 0 {
		return nil, fmt.Errorf("names no command")
	}
	return argv, nil
}

// template reports whether a value holds placeholders, and checks their
// form (dry) for the reader's messages.
// (A value without placeholders is taken as written.) refKey is the Ref's
// Key, "env.NAME" or "headers.NAME".
func (r *reader) template(key, refKey, v string, refs *[]Ref) {
	if !strings.Contains(v, "${") {
		return
	}
	x := expander{lookup: func(string) (string, bool) { return "", true }, refs: true, dry: true}
	if _, u := x.expand(v); u != nil {
		r.fail(key, u.fix, "%s", u.msg)
		return
	}
	*refs = append(*refs, Ref{Key: refKey, Template: v, Line: r.pos.line(key)})
}

// ResolveSecrets expands every Ref of every server of cfg in place (env
// values and header values), reading the files, running the commands and
// looking the variables up, and records the values it resolved in each
// server's Secrets. Every reference that does not resolve is an *Error
// naming its file and line; the values are never in a message.
func ResolveSecrets(cfg *Config, src SecretSources) error {
	src.fill()
	var errs ErrorList
	runs := newSecretRuns()
	for i := range cfg.Servers {
		errs = append(errs, cfg.Servers[i].resolveSecrets(src, runs)...)
	}
	if len(errs) > 0 {
		slices.SortStableFunc(errs, func(a, b *Error) int { return strings.Compare(a.File, b.File)*1_000_000 + a.Line - b.Line })
		return errs
	}
	return nil
}

func (s *Server) resolveSecrets(src SecretSources, runs *secretRuns) ErrorList {
	var errs ErrorList
	// An editor's file records what its variables expanded to at load
	// (editorLoader.expandSecret): kept beside what resolves here.
	if s.Secrets == nil {
		s.Secrets = map[string]string{}
	}
	for _, ref := range s.Refs {
		key := "mcp." + s.Name + "." + ref.Key
		x := expander{lookup: src.LookupEnv, refs: true, src: &src, runs: runs, dir: filepath.Dir(s.File)}
		x.found = func(ph, v string) {
			if len(v) >= minSecret {
				s.Secrets[ref.Key+" "+ph] = v
			}
		}
		v, u := x.expand(ref.Template)
		if u != nil {
			errs = append(errs, &Error{File: s.File, Line: ref.Line, Key: key, Msg: u.msg, Fix: u.fix})
			continue
		}
		if len(v) >= minSecret {
			s.Secrets[ref.Key] = v
		}
		name, isEnv := strings.CutPrefix(ref.Key, "env.")
		if isEnv {
			if s.Env == nil {
				s.Env = map[string]string{}
			}
			s.Env[name] = v
			continue
		}
		h := strings.TrimPrefix(ref.Key, "headers.")
		if strings.ContainsAny(v, "\r\n") {
			errs = append(errs, &Error{File: s.File, Line: ref.Line, Key: key, Msg: "resolves to a value with a line break, which a header cannot carry", Fix: "point it at a one-line secret"})
			continue
		}
		if s.Remote != nil {
			if s.Remote.Headers == nil {
				s.Remote.Headers = map[string]string{}
			}
			s.Remote.Headers[h] = v
		}
	}
	s.secretsResolved = true
	return errs
}

// SecretValues are the values ResolveSecrets resolved for the server, by
// where they came from ("env.TOKEN", "headers.X-Key ${file:/run/k}"),
// for redaction: every one at least 4 bytes long.
func (s *Server) SecretValues() map[string]string { return maps.Clone(s.Secrets) }

// Unresolved reports whether the server has secret references that
// ResolveSecrets has not resolved: it must not be started so, with
// "${cmd:…}" in its environment.
func (s *Server) Unresolved() bool { return len(s.Refs) > 0 && !s.secretsResolved }

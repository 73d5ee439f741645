package config

import (
	"fmt"
	"strings"
)

// expander resolves the ${…} placeholders editors allow in a server's
// command, args, env values and cwd. The forms are the union of what the
// editors write:
//
//	${VAR}              the environment variable VAR (Claude Code, Cursor)
//	${VAR:-default}     VAR, or default when VAR is unset or empty; the
//	                    default may hold placeholders (${A:-${B}}), expanded
//	                    only when it is used
//	${env:VAR}          VAR (VS Code, Cursor)
//	${HOME}, ${userHome} the home directory, from $HOME
//	${workspaceFolder}  the workspace directory (--workspace)
//
// In a server's env values and header values (and only there), secret
// references may also be used (secrets.go):
//
//	${file:PATH}        the file's content, one trailing newline dropped;
//	                    a relative PATH is beside the config file
//	${cmd:PROG ARG…}    what the command prints on stdout, one trailing
//	                    newline dropped: run without a shell, with
//	                    capbridge's environment, within a timeout
//
// Anything else, and ${input:…} (a VS Code prompt, which capbridge has no
// one to ask), is refused rather than passed through: a literal "${X}" in
// an argument is almost always a secret the operator forgot to export.
type expander struct {
	lookup    func(string) (string, bool)
	workspace string // "" when there is none
	// refs allows ${file:…} and ${cmd:…}; src reads them, nil when the
	// expander only checks their form (dry).
	refs bool
	src  *SecretSources
	runs *secretRuns // the commands run, with src
	dir  string      // where a relative ${file:…} path starts
	// dry checks every placeholder's form and resolves none: a variable
	// reads as set and empty, a file or command is not read or run.
	dry bool
	// found, when set, hears each placeholder's value as it resolves it,
	// for the redactors.
	found func(placeholder, value string)
}

// unresolved says why one placeholder could not be expanded.
type unresolved struct {
	placeholder string // as written, "${GITHUB_TOKEN}"
	msg, fix    string
}

// maxNesting bounds placeholders inside defaults: ${A:-${B:-${C}}} is
// three deep, and nobody writes ten.
const maxNesting = 8

// expand returns s with every placeholder replaced, or the first one that
// cannot be.
func (x *expander) expand(s string) (string, *unresolved) {
	return x.expandDepth(s, 0)
}

func (x *expander) expandDepth(s string, depth int) (string, *unresolved) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		end := closingBrace(s[i+2:])
		if end < 0 {
			return "", &unresolved{placeholder: s[i:], msg: "has an unterminated ${", fix: "close it with }, or write the text without ${"}
		}
		ph := s[i : i+2+end+1]
		v, u := x.resolve(ph, ph[2:len(ph)-1], depth)
		if u != nil {
			return "", u
		}
		b.WriteString(v)
		s = s[i+len(ph):]
	}
}

// closingBrace returns the index in s (the text after a "${") of the '}'
// that closes it, counting the placeholders nested in a default
// (${A:-${B}}), or -1.
func closingBrace(s string) int {
	open := 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '{':
			open++
			i++
		case s[i] == '}':
			if open == 0 {
				return i
			}
			open--
		}
	}
	return -1
}

func (x *expander) resolve(ph, body string, depth int) (string, *unresolved) {
	if kind, arg, ok := secretRef(body); ok {
		if !x.refs {
			return "", &unresolved{placeholder: ph, msg: fmt.Sprintf("uses %s, a secret reference, where only variables are expanded", ph),
				fix: "use ${file:…} and ${cmd:…} in a server's env values and header values only"}
		}
		v, u := x.secret(ph, kind, arg)
		if u == nil && x.found != nil {
			x.found(ph, v)
		}
		return v, u
	}
	v, u := x.variable(ph, body, depth)
	if u == nil && x.found != nil && !x.dry && body != "workspaceFolder" && body != "userHome" && body != "HOME" {
		// A variable's value may be a token exported for the server; the
		// workspace and the home directory are paths, which redacting
		// would only garble.
		x.found(ph, v)
	}
	return v, u
}

// variable resolves a placeholder that names a variable (or the
// workspace, or the home directory).
func (x *expander) variable(ph, body string, depth int) (string, *unresolved) {
	name, def, hasDef := strings.Cut(body, ":-")
	switch {
	case strings.HasPrefix(body, "input:"):
		return "", &unresolved{placeholder: ph, msg: fmt.Sprintf("uses %s, a VS Code prompt capbridge cannot answer", ph),
			fix: "replace it with ${env:NAME} and export NAME before starting capbridge, or write the value"}
	case body == "workspaceFolder":
		if x.workspace == "" {
			return "", &unresolved{placeholder: ph, msg: "uses ${workspaceFolder} and no workspace is known", fix: "start capbridge with --workspace DIR"}
		}
		return x.workspace, nil
	case body == "userHome":
		name = "HOME"
	case strings.HasPrefix(body, "env:"):
		name, hasDef = strings.TrimPrefix(body, "env:"), false
	}
	if !envName.MatchString(name) {
		return "", &unresolved{placeholder: ph, msg: fmt.Sprintf("uses %s, which capbridge does not expand", ph),
			fix: "write ${VAR}, ${VAR:-default}, ${env:VAR}, ${HOME} or ${workspaceFolder} (and in env and header values ${file:PATH} or ${cmd:PROG ARG…}), or the value itself"}
	}
	if !x.dry {
		if v, ok := x.lookup(name); ok && (v != "" || !hasDef) {
			return v, nil
		}
	}
	if hasDef {
		// The default is expanded only when it is used, as a shell does:
		// ${A:-${B}} needs B only when A is unset or empty. Checking
		// (dry), whether it is used is not known, so its form is
		// checked: a mistyped reference in it would otherwise pass until
		// the day it is.
		if depth >= maxNesting {
			return "", &unresolved{placeholder: ph, msg: fmt.Sprintf("nests placeholders more than %d deep", maxNesting), fix: "write fewer nested defaults"}
		}
		return x.expandDepth(def, depth+1)
	}
	if x.dry {
		return "", nil
	}
	return "", &unresolved{placeholder: ph, msg: fmt.Sprintf("uses %s and %s is not set", ph, name),
		fix: fmt.Sprintf("export %s before starting capbridge, or write ${%s:-default}", name, name)}
}

package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/capbridge/capbridge/jail"
)

// runtimeInfo is one language's runtime, resolved once: the binary, the
// host paths it needs bound, the client files every run of it gets, and
// how a program is laid out.
type runtimeInfo struct {
	lang        string
	codegenLang string // the façade generator's name for the language
	facadeExt   string // a façade's file name is its module and this
	argv        []string
	binds       []jail.Bind
	files       []jail.File // the runner and the client, the same for every run
	env         []string
}

// resolveRuntime finds lang's runtime and client as cfg says.
func resolveRuntime(lang string, cfg *Config) (*runtimeInfo, error) {
	switch lang {
	case TypeScript:
		return resolveTS(cfg)
	case Python:
		return resolvePython(cfg)
	}
	return nil, fmt.Errorf("%w: language %q has no runtime in this capbridge (typescript, python)", ErrBadRequest, lang)
}

func resolveTS(cfg *Config) (*runtimeInfo, error) {
	node, err := realBinary(cfg.Node, "node")
	if err != nil {
		return nil, fmt.Errorf("%w: typescript: %v", ErrUnavailable, err)
	}
	client := cfg.TSClient
	msgpack := filepath.Join(client, "node_modules", "@msgpack", "msgpack")
	if client == "" || !exists(filepath.Join(client, "src", "index.ts")) || !exists(msgpack) {
		return nil, fmt.Errorf("%w: typescript: the client package (capwire/ts with `npm ci` run in it) is not configured or incomplete: %q", ErrUnavailable, client)
	}
	srcs, err := filepath.Glob(filepath.Join(client, "src", "*.ts"))
	if err != nil {
		return nil, err
	}
	// The client is compiled here once, from its source, so no build step
	// and no network is needed: every run gets the same JavaScript.
	const pkg = "/node_modules/@capbridge/capwire"
	files := []jail.File{
		{Path: "/capbridge/runner.mjs", Data: runnerTS},
		{Path: pkg + "/package.json", Data: []byte(`{"name":"@capbridge/capwire","type":"module","exports":"./index.js"}`)},
	}
	for _, src := range srcs {
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		js, err := StripTypes(filepath.Base(src), data)
		if err != nil {
			return nil, fmt.Errorf("%w: typescript: compiling the client: %v", ErrUnavailable, err)
		}
		files = append(files, jail.File{Path: pkg + "/" + strings.TrimSuffix(filepath.Base(src), ".ts") + ".js", Data: js})
	}
	rt := &runtimeInfo{lang: TypeScript, codegenLang: "ts", facadeExt: ".ts",
		argv:  []string{node, "/capbridge/runner.mjs"},
		binds: append(systemBinds(node), jail.Bind{Source: msgpack, Target: "/node_modules/@msgpack/msgpack"}),
		files: files, env: []string{"NODE_NO_WARNINGS=1"}}
	return rt, nil
}

func resolvePython(cfg *Config) (*runtimeInfo, error) {
	name := cfg.Python
	if name == "" && exists("/usr/bin/python3") {
		// The system's, when there is one: a version manager's shim on
		// PATH (pyenv) is a script that needs the user's home.
		name = "/usr/bin/python3"
	}
	py, err := realBinary(name, "python3")
	if err != nil {
		return nil, fmt.Errorf("%w: python: %v", ErrUnavailable, err)
	}
	client := filepath.Join(cfg.PyClient, "capwire")
	if cfg.PyClient == "" || !exists(filepath.Join(client, "__init__.py")) {
		return nil, fmt.Errorf("%w: python: the client package (capwire/python) is not configured or incomplete: %q", ErrUnavailable, cfg.PyClient)
	}
	// Where the interpreter keeps its standard library, which the jail
	// must show when it is not under /usr.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-I", "-S", "-c", "import sys, json; print(json.dumps([sys.base_prefix, sys.version_info[:2]]))").Output()
	if err != nil {
		return nil, fmt.Errorf("%w: python: %s does not run: %v", ErrUnavailable, py, err)
	}
	var probe []json.RawMessage
	var prefix string
	var ver [2]int
	if json.Unmarshal(out, &probe) != nil || len(probe) != 2 || json.Unmarshal(probe[0], &prefix) != nil || json.Unmarshal(probe[1], &ver) != nil {
		return nil, fmt.Errorf("%w: python: cannot read what %s says of itself", ErrUnavailable, py)
	}
	if ver[0] < 3 || (ver[0] == 3 && ver[1] < 10) {
		return nil, fmt.Errorf("%w: python: %s is %d.%d; the client needs 3.10 or later", ErrUnavailable, py, ver[0], ver[1])
	}
	binds := systemBinds(py)
	if !underSystem(prefix) {
		binds = append(binds, jail.Bind{Source: prefix, Target: prefix})
	}
	binds = append(binds, jail.Bind{Source: client, Target: "/capbridge/python/capwire"})
	return &runtimeInfo{lang: Python, codegenLang: "python", facadeExt: ".py",
		argv:  []string{py, "-I", "-S", "-B", "/capbridge/runner.py"},
		binds: binds, files: []jail.File{{Path: "/capbridge/runner.py", Data: runnerPy}},
		env: []string{"PYTHONDONTWRITEBYTECODE=1", "PYTHONIOENCODING=utf-8"}}, nil
}

// program lays out one run of code with its façades.
func (rt *runtimeInfo) program(code string, facades []jail.File, token, callSocket string) *jail.Program {
	p := &jail.Program{
		Argv: rt.argv,
		Env: append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8", "TMPDIR=/tmp",
			"CAPBRIDGE_SOCKET=" + jailSocket, "CAPBRIDGE_TOKEN=" + token}, rt.env...),
		Dir:   "/tmp",
		Binds: append(append([]jail.Bind{}, rt.binds...), jail.Bind{Source: callSocket, Target: jailSocket, Writable: true}),
		Files: append(append([]jail.File{}, rt.files...), facades...),
	}
	switch rt.lang {
	case TypeScript:
		p.Files = append(p.Files, jail.File{Path: jailWork + "/main.ts", Data: []byte(code)})
		p.Transform = append(p.Transform, jail.Transform{From: jailWork + "/main.ts", To: jailWork + "/main.js"})
		for _, f := range facades {
			p.Transform = append(p.Transform, jail.Transform{From: f.Path, To: strings.TrimSuffix(f.Path, ".ts") + ".js"})
		}
	case Python:
		p.Files = append(p.Files, jail.File{Path: jailWork + "/main.py", Data: []byte(code)})
	}
	return p
}

// realBinary resolves a runtime binary: the configured path, or name on
// PATH, with every symbolic link followed, so the jail binds the file
// itself.
func realBinary(configured, name string) (string, error) {
	p := configured
	if p == "" {
		var err error
		if p, err = exec.LookPath(name); err != nil {
			return "", fmt.Errorf("%s is not on PATH", name)
		}
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(real)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", real)
	}
	return filepath.Abs(real)
}

// systemBinds binds a runtime binary's installation when it lies outside
// the jail's system view (/opt/node/bin/node: /opt/node).
func systemBinds(bin string) []jail.Bind {
	if underSystem(bin) {
		return nil
	}
	dir := filepath.Dir(filepath.Dir(bin))
	return []jail.Bind{{Source: dir, Target: dir}}
}

// underSystem reports whether path lies in the jail's default system
// view.
func underSystem(path string) bool {
	for _, s := range jail.DefaultSystem {
		if path == s || strings.HasPrefix(path, s+"/") {
			return true
		}
	}
	return false
}

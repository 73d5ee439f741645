package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	pyclient "github.com/capbridge/capbridge/capwire/python"
	tsclient "github.com/capbridge/capbridge/capwire/ts"
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
	prep        *goPrep // Go's prepared tree
}

// resolveRuntime finds lang's runtime and client as cfg says.
func resolveRuntime(lang string, cfg *Config) (*runtimeInfo, error) {
	switch lang {
	case TypeScript:
		return resolveTS(cfg)
	case Python:
		return resolvePython(cfg)
	case Go:
		return resolveGo(cfg)
	}
	return nil, fmt.Errorf("%w: language %q has no runtime in this capbridge (typescript, python, go)", ErrBadRequest, lang)
}

func resolveTS(cfg *Config) (*runtimeInfo, error) {
	node, err := realBinary(cfg.Node, "node")
	if err != nil {
		return nil, fmt.Errorf("%w: typescript: %v", ErrUnavailable, err)
	}
	var src fs.FS // nil: the binary's own
	if cfg.TSClient != "" {
		src = os.DirFS(cfg.TSClient)
	}
	// The client is built here once, from its source, so no build step
	// and no network is needed: every run gets the same package, its one
	// dependency bundled in it.
	pkg, err := tsclient.Package(src)
	if err != nil {
		return nil, fmt.Errorf("%w: typescript: the client: %v", ErrUnavailable, err)
	}
	files := []jail.File{{Path: "/capbridge/runner.mjs", Data: runnerTS}}
	for _, f := range pkg {
		files = append(files, jail.File{Path: "/node_modules/@capbridge/capwire/" + f.Path, Data: f.Data})
	}
	rt := &runtimeInfo{lang: TypeScript, codegenLang: "ts", facadeExt: ".ts",
		argv:  []string{node, "/capbridge/runner.mjs"},
		binds: systemBinds(node),
		files: files, env: []string{"NODE_NO_WARNINGS=1"}}
	return rt, nil
}

// namedFile is one file of a client.
type namedFile struct {
	name string
	data []byte
}

// clientFiles reads a client's files matching pattern: from dir/sub when
// dir is set (a checkout), else from the binary's own copy in embedded
// under esub.
func clientFiles(dir, sub string, embedded fs.FS, esub, pattern string) ([]namedFile, error) {
	fsys, root := embedded, esub
	if dir != "" {
		fsys, root = os.DirFS(dir), sub
	}
	names, err := fs.Glob(fsys, path.Join(root, pattern))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no %s in %s", pattern, filepath.Join(dir, sub))
	}
	out := make([]namedFile, 0, len(names))
	for _, n := range names {
		data, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		out = append(out, namedFile{path.Base(n), data})
	}
	return out, nil
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
	client, err := clientFiles(cfg.PyClient, "capwire", pyclient.Client, "capwire", "*")
	if err != nil {
		return nil, fmt.Errorf("%w: python: the client: %v", ErrUnavailable, err)
	}
	files := []jail.File{{Path: "/capbridge/runner.py", Data: runnerPy}}
	for _, f := range client {
		if strings.HasSuffix(f.name, ".py") || f.name == "py.typed" {
			files = append(files, jail.File{Path: "/capbridge/python/capwire/" + f.name, Data: f.data})
		}
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
	return &runtimeInfo{lang: Python, codegenLang: "python", facadeExt: ".py",
		argv:  []string{py, "-I", "-S", "-B", "/capbridge/runner.py"},
		binds: binds, files: files,
		env: []string{"PYTHONDONTWRITEBYTECODE=1", "PYTHONIOENCODING=utf-8"}}, nil
}

// program lays out one run of code with its façades, cold: the base
// every run shares and the run's own parts. callSocket is left out when
// empty.
func (rt *runtimeInfo) program(code string, facades []jail.File, token, callSocket string) *jail.Program {
	p := rt.base(callSocket)
	d := rt.delivery(code, facades, token)
	p.Files = append(p.Files, d.Files...)
	p.Transform = d.Transform
	p.Env = append(p.Env, d.Env...)
	return p
}

// base is what every run of rt shares: the runtime, its environment but
// the token, the system and call socket binds, the runner and the client.
func (rt *runtimeInfo) base(callSocket string) *jail.Program {
	p := &jail.Program{
		Argv: rt.argv,
		Env: append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "LANG=C.UTF-8", "TMPDIR=/tmp",
			"CAPBRIDGE_SOCKET=" + jailSocket}, rt.env...),
		Dir:   "/tmp",
		Binds: slices.Clone(rt.binds),
		Files: slices.Clone(rt.files),
	}
	if callSocket != "" {
		// Read-only: connect(2) needs write permission on the socket's
		// inode, which the mount's flags do not touch (unix(7)); a
		// writable mount would let a program that owns the inode (it runs
		// as capbridge's user when capbridge is not root) chmod it and
		// lock every later run and client out.
		p.Binds = append(p.Binds, jail.Bind{Source: callSocket, Target: jailSocket})
	}
	if rt.lang == Go {
		p.Dir = jailWork
		p.Binds = append(p.Binds, goBinds(rt.prep.dir)...)
		p.Overlays = []jail.Overlay{{Source: filepath.Join(rt.prep.dir, "cache"), Target: jailGoBld}}
	}
	return p
}

// delivery is one run's own part: its code and façades (in /work, with
// TypeScript's transforms) and its token.
func (rt *runtimeInfo) delivery(code string, facades []jail.File, token string) *jail.Program {
	p := &jail.Program{Files: slices.Clone(facades), Env: []string{"CAPBRIDGE_TOKEN=" + token}}
	main := jailWork + "/main" + rt.facadeExt
	p.Files = append(p.Files, jail.File{Path: main, Data: []byte(code)})
	if rt.lang == TypeScript {
		for _, f := range p.Files {
			p.Transform = append(p.Transform, jail.Transform{From: f.Path, To: strings.TrimSuffix(f.Path, ".ts") + ".js"})
		}
	}
	return p
}

// facadePath is where a façade of module lies in the jail: beside the
// program, or, in Go, as a package of the program's module.
func (rt *runtimeInfo) facadePath(module string) string {
	if rt.lang == Go {
		return path.Join(jailWork, module, module+rt.facadeExt)
	}
	return path.Join(jailWork, module+rt.facadeExt)
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

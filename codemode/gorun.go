package codemode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/capbridge/capbridge"
	"github.com/capbridge/capbridge/jail"
)

// Go programs run by `go run` in the jail, in a module of their own
// ("mcp"): the façades are its packages (import "mcp/<server>"), the
// capwire client is the capbridge module this binary carries (replaced
// to a read-only copy), its two dependencies come from a read-only
// module cache, and the build cache is prepared once and shown to each
// run through an overlay, so a run compiles only its own code and links.
// Nothing is fetched: GOPROXY is off and GOFLAGS has -mod=readonly.
const (
	goModule   = "mcp"
	jailGoSrc  = "/capbridge/go/src"
	jailGoMod  = "/capbridge/go/mod"
	jailGoBld  = "/capbridge/go/cache"
	goPrepWall = 10 * time.Minute // preparing compiles the standard library once
)

// goRunPkg is the package a Go program returns its value with.
const goRunPkg = `// Package run returns a program's value to capbridge.
package run

import (
	"encoding/json"
	"os"
)

// Return writes v, as JSON, as the run's result (once; the last call wins).
func Return(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f := os.NewFile(4, "result")
	if _, err := f.Seek(0, 0); err == nil {
		_ = f.Truncate(0)
	}
	_, err = f.Write(b)
	return err
}
`

// goPrep is the prepared tree Go runs use: src (the capbridge module's
// client packages), mod (the module cache) and cache (the build cache),
// made once per binary and Go version, in the background: the first Go
// run waits for it.
type goPrep struct {
	once sync.Once
	done chan struct{}
	dir  string
	err  error
}

func resolveGo(cfg *Config) (*runtimeInfo, error) {
	goBin, err := realBinary(cfg.Go, "go")
	if err != nil {
		return nil, fmt.Errorf("%w: go: %v", ErrUnavailable, err)
	}
	if len(cfg.Jail.Wrap) > 0 {
		return nil, fmt.Errorf("%w: go: its build cache is an overlay, which only the built-in jail makes", ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ver, err := exec.CommandContext(ctx, goBin, "env", "GOVERSION", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("%w: go: %s does not run: %v", ErrUnavailable, goBin, err)
	}
	lines := strings.Fields(string(ver))
	if len(lines) != 2 {
		return nil, fmt.Errorf("%w: go: cannot read what %s says of itself", ErrUnavailable, goBin)
	}
	goroot := lines[1]
	gomod, gosum, err := goModFiles()
	if err != nil {
		return nil, fmt.Errorf("%w: go: %v", ErrUnavailable, err)
	}
	binds := systemBinds(goBin)
	if !underSystem(goroot) && !slices.ContainsFunc(binds, func(b jail.Bind) bool { return b.Source == goroot }) {
		binds = append(binds, jail.Bind{Source: goroot, Target: goroot})
	}
	rt := &runtimeInfo{lang: Go, codegenLang: "go", facadeExt: ".go",
		argv:  []string{goBin, "run", "."},
		binds: binds,
		files: []jail.File{
			{Path: "/work/go.mod", Data: gomod},
			{Path: "/work/go.sum", Data: gosum},
			{Path: "/work/run/run.go", Data: []byte(goRunPkg)},
		},
		env: []string{"GOCACHE=" + jailGoBld, "GOMODCACHE=" + jailGoMod, "GOPROXY=off", "GOSUMDB=off",
			"GOFLAGS=-trimpath -mod=readonly", "GOTOOLCHAIN=local", "CGO_ENABLED=0", "GOTELEMETRY=off",
			"GOENV=off", "GOPATH=/tmp/go", "GOTMPDIR=/tmp"},
		prep: &goPrep{done: make(chan struct{})},
	}
	key := sha256.New()
	fmt.Fprintf(key, "%s\n%s\n%s\n", lines[0], goroot, goBin)
	_ = fs.WalkDir(capbridge.GoClient, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := fs.ReadFile(capbridge.GoClient, p)
			fmt.Fprintf(key, "%s %d\n", p, len(b))
			key.Write(b)
		}
		return nil
	})
	rt.prep.dir = filepath.Join(goCacheRoot(cfg), "go-"+hex.EncodeToString(key.Sum(nil))[:16])
	return rt, nil
}

// goModFiles are the program module's go.mod and go.sum: it requires the
// capbridge module, replaced by the copy in the jail, and the versions of
// its dependencies this binary was built with.
func goModFiles() (gomod, gosum []byte, err error) {
	mod, err := fs.ReadFile(capbridge.GoClient, "go.mod")
	if err != nil {
		return nil, nil, err
	}
	sum, err := fs.ReadFile(capbridge.GoClient, "go.sum")
	if err != nil {
		return nil, nil, err
	}
	var b strings.Builder
	b.WriteString("module " + goModule + "\n\ngo 1.26\n\nrequire github.com/capbridge/capbridge v0.0.0\n\nrequire (\n")
	var s strings.Builder
	for _, dep := range goClientDeps {
		v := requiredVersion(string(mod), dep)
		if v == "" {
			return nil, nil, fmt.Errorf("go.mod does not require %s", dep)
		}
		fmt.Fprintf(&b, "\t%s %s // indirect\n", dep, v)
		for line := range strings.Lines(string(sum)) {
			if strings.HasPrefix(line, dep+" "+v+" ") || strings.HasPrefix(line, dep+" "+v+"/go.mod ") {
				s.WriteString(line)
			}
		}
	}
	b.WriteString(")\n\nreplace github.com/capbridge/capbridge => " + jailGoSrc + "\n")
	return []byte(b.String()), []byte(s.String()), nil
}

// goClientDeps are the modules the capwire client's packages import
// (TestGoClientComplete keeps the list).
var goClientDeps = []string{"github.com/vmihailenco/msgpack/v5", "github.com/vmihailenco/tagparser/v2"}

// requiredVersion finds dep's version in a go.mod's require lines.
func requiredVersion(gomod, dep string) string {
	for line := range strings.Lines(gomod) {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == dep {
			return f[1]
		}
	}
	return ""
}

// goCacheRoot is where prepared Go trees are kept: cfg.GoCache, else the
// user's cache directory; as root (whose jails run as another user, who
// must reach it) /var/cache/capbridge.
func goCacheRoot(cfg *Config) string {
	if cfg.GoCache != "" {
		return cfg.GoCache
	}
	if os.Getuid() == 0 {
		return "/var/cache/capbridge"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "capbridge")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("capbridge-%d", os.Getuid()))
}

// wait returns once the tree is prepared (starting that if no one has),
// or ctx ends.
func (g *goPrep) wait(ctx context.Context, r *Runner) error {
	g.once.Do(func() {
		go func() {
			defer close(g.done)
			g.err = r.prepareGo(g)
		}()
	})
	select {
	case <-g.done:
		return g.err
	case <-ctx.Done():
		return fmt.Errorf("%w: go: still preparing its build cache (a first start compiles the standard library): %v", ErrUnavailable, ctx.Err())
	}
}

// prepareGo makes g.dir: src from this binary, mod by `go mod download`
// (from the host's module cache when it holds them, else through its
// GOPROXY), and cache by building, in a jail laid out as a run's is, a
// program that imports the client and the standard library's usual
// packages, with the cache writable. It is built beside and renamed into
// place, so a crash or a concurrent capbridge leaves no half tree.
func (r *Runner) prepareGo(g *goPrep) error {
	if _, err := os.Stat(filepath.Join(g.dir, "ready")); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(g.dir), 0o755); err != nil {
		return fmt.Errorf("%w: go: %v", ErrUnavailable, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(g.dir), filepath.Base(g.dir)+".tmp-")
	if err != nil {
		return fmt.Errorf("%w: go: %v", ErrUnavailable, err)
	}
	defer removeAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	fail := func(step string, err error) error {
		return fmt.Errorf("%w: go: preparing its build cache: %s: %v", ErrUnavailable, step, err)
	}
	if err := writeGoSrc(filepath.Join(tmp, "src")); err != nil {
		return fail("the client's source", err)
	}
	rt := r.runtime[Go]
	ctx, cancel := context.WithTimeout(r.ctx, goPrepWall)
	defer cancel()
	if err := downloadGoDeps(ctx, rt.argv[0], filepath.Join(tmp, "mod")); err != nil {
		return fail("the module cache", err)
	}
	cache := filepath.Join(tmp, "cache")
	if err := os.Mkdir(cache, 0o755); err != nil {
		return fail("the build cache", err)
	}
	// The jail's user writes the cache and, later, each run's overlay
	// copies up what it touches as that user.
	uid, gid := r.cfg.Jail.RunIDs()
	if os.Getuid() == 0 {
		if err := os.Chown(cache, uid, gid); err != nil {
			return fail("the build cache", err)
		}
	}
	// Laid out as a run is, from the tree being made, with the build
	// cache writable; no call socket: the warm-up makes no call.
	p := rt.program(goWarmup, nil, "", "")
	p.Binds = slices.DeleteFunc(p.Binds, func(b jail.Bind) bool { return strings.HasPrefix(b.Source, g.dir+"/") })
	p.Binds = append(p.Binds, goBinds(tmp)...)
	p.Binds = append(p.Binds, jail.Bind{Source: cache, Target: jailGoBld, Writable: true})
	p.Overlays = nil
	p.WallClock = goPrepWall
	out, err := r.cfg.Jail.Run(ctx, p)
	if err != nil {
		return fail("building", err)
	}
	if out.Ended != jail.EndedExit || out.ExitCode != 0 {
		return fail("building", fmt.Errorf("%s, exit %d: %s", out.Ended, out.ExitCode, out.Stderr))
	}
	if err := os.WriteFile(filepath.Join(tmp, "ready"), nil, 0o644); err != nil {
		return fail("marking it ready", err)
	}
	if err := os.Rename(tmp, g.dir); err != nil {
		if _, serr := os.Stat(filepath.Join(g.dir, "ready")); serr == nil {
			return nil // another capbridge prepared it meanwhile
		}
		return fail("moving it into place", err)
	}
	return nil
}

// goBinds are the prepared tree's read-only parts, where a run sees them.
func goBinds(dir string) []jail.Bind {
	return []jail.Bind{{Source: filepath.Join(dir, "src"), Target: jailGoSrc}, {Source: filepath.Join(dir, "mod"), Target: jailGoMod}}
}

// goWarmup is what the preparation builds: the client and the packages
// programs most often import.
const goWarmup = `package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/capbridge/capbridge/capwire"
	"mcp/run"
)

var _ = []any{bytes.NewReader, context.Background, errors.New, math.Abs, regexp.MustCompile, sort.Strings,
	strconv.Itoa, strings.Fields, time.Now, os.Getenv, capwire.Shared}

func main() {
	_ = json.Valid(nil)
	fmt.Println(run.Return(nil))
}
`

// writeGoSrc writes the capbridge module's client packages, without their
// tests, and a go.mod requiring only what they import.
func writeGoSrc(dir string) error {
	gomod, _, err := goModFiles()
	if err != nil {
		return err
	}
	mod := strings.Replace(strings.Split(string(gomod), "\nreplace ")[0], "module "+goModule, "module github.com/capbridge/capbridge", 1)
	mod = strings.Replace(mod, "require github.com/capbridge/capbridge v0.0.0\n\n", "", 1)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		return err
	}
	return fs.WalkDir(capbridge.GoClient, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path.Ext(p) != ".go" || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := fs.ReadFile(capbridge.GoClient, p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, path.Dir(p)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, p), b, 0o644)
	})
}

// downloadGoDeps fills the module cache at dir with the client's
// dependencies: from the host's module cache when it has them (no
// network), else through the host's GOPROXY.
func downloadGoDeps(ctx context.Context, goBin, dir string) error {
	gomod, _, err := goModFiles()
	if err != nil {
		return err
	}
	var args []string
	for _, dep := range goClientDeps {
		args = append(args, dep+"@"+requiredVersion(string(gomod), dep))
	}
	hostCache, _ := exec.CommandContext(ctx, goBin, "env", "GOMODCACHE", "GOPROXY").Output()
	f := strings.Fields(string(hostCache))
	proxy := "https://proxy.golang.org,direct"
	if len(f) == 2 {
		proxy = "file://" + filepath.Join(f[0], "cache", "download") + "," + f[1]
	}
	cmd := exec.CommandContext(ctx, goBin, append([]string{"mod", "download"}, args...)...)
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOMODCACHE="+dir, "GOPROXY="+proxy, "GOFLAGS=-modcacherw", "GO111MODULE=on", "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go mod download: %v: %s", err, strings.TrimSpace(string(out)))
	}
	// Readable by the jail's user, whoever it is.
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	})
}

// removeAll removes a tree, module cache included (which go writes
// read-only).
func removeAll(dir string) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}

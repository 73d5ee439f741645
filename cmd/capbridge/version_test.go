package main

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// versionText on the build info each way of building capbridge stamps.
func TestVersionText(t *testing.T) {
	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{{
		name: "go install of a tag, from the module proxy: the tag and the module's checksum",
		bi: &debug.BuildInfo{GoVersion: "go1.26.8",
			Main:     debug.Module{Path: "github.com/capbridge/capbridge", Version: "v1.4.0", Sum: "h1:abc="},
			Settings: settings("GOOS", "linux", "GOARCH", "arm64")},
		ok: true,
		want: "capbridge v1.4.0\n" +
			"module    github.com/capbridge/capbridge v1.4.0 h1:abc=\n" +
			"built by  go1.26.8 for linux/arm64\n",
	}, {
		name: "go build in a clone with uncommitted changes",
		bi: &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "github.com/capbridge/capbridge", Version: "v1.4.1-0.20261204205521-0123456789ab+dirty"},
			Settings: settings("GOOS", "linux", "GOARCH", "amd64", "vcs", "git", "vcs.revision", rev,
				"vcs.time", "2026-12-04T20:55:21Z", "vcs.modified", "true")},
		ok: true,
		want: "capbridge v1.4.1-0.20261204205521-0123456789ab+dirty\n" +
			"commit    " + rev + " (modified: built with uncommitted changes)\n" +
			"committed 2026-12-04T20:55:21Z\n" +
			"built by  go1.26.8 for linux/amd64\n",
	}, {
		name: "a toolchain that stamps no version from VCS: devel and the commit",
		bi: &debug.BuildInfo{GoVersion: "go1.23.0",
			Main:     debug.Module{Path: "github.com/capbridge/capbridge", Version: "(devel)"},
			Settings: settings("GOOS", "darwin", "GOARCH", "arm64", "vcs.revision", rev, "vcs.modified", "false")},
		ok: true,
		want: "capbridge devel-0123456789ab\n" +
			"commit    " + rev + "\n" +
			"built by  go1.23.0 for darwin/arm64\n",
	}, {
		name: "built with -buildvcs=false",
		bi:   &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: settings("GOOS", "linux", "GOARCH", "amd64")},
		ok:   true,
		want: "capbridge devel\nbuilt by  go1.26.8 for linux/amd64\n",
	}, {
		name: "no build info",
		want: "capbridge devel (this binary carries no build info)\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionText(tc.bi, tc.ok); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// A real go build, without -ldflags, at a tagged commit of a git clone:
// the toolchain stamps the tag as the module version and the commit, and
// versionText shows both, then the modified flag once the tree changes.
// (The program built is a stand-in: it is the build info that matters,
// and TestServe checks that capbridge prints its own.)
func TestVersionOfTaggedBuild(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed to stamp a build: %v", err)
	}
	repo, out := t.TempDir(), t.TempDir()
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = repo
		// The machine's go env may say -buildvcs=false; a user's
		// go install stamps, and so does this build.
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true", "GOTOOLCHAIN=local",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, b)
		}
		return strings.TrimSpace(string(b))
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(repo, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/tagged\n\ngo 1.26.0\n")
	write("main.go", "package main\n\nfunc main() {}\n")
	run("git", "init", "-q")
	run("git", "add", ".")
	run("git", "commit", "-q", "-m", "first")
	run("git", "tag", "v1.2.3")
	rev := run("git", "rev-parse", "HEAD")

	build := func() string {
		t.Helper()
		bin := filepath.Join(out, "tagged")
		run("go", "build", "-o", bin, ".")
		bi, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		return versionText(bi, true)
	}
	got := build()
	if !strings.HasPrefix(got, "capbridge v1.2.3\n") || !strings.Contains(got, "\ncommit    "+rev+"\n") || !strings.Contains(got, "\ncommitted ") {
		t.Errorf("a build at tag v1.2.3 (commit %s) prints\n%s", rev, got)
	}
	write("main.go", "package main\n\nfunc main() { println() }\n")
	if got := build(); !strings.HasPrefix(got, "capbridge v1.2.3+dirty\n") || !strings.Contains(got, rev+" (modified: built with uncommitted changes)\n") {
		t.Errorf("a build with an uncommitted change prints\n%s", got)
	}
}

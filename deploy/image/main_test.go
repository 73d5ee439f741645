package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImage builds capbridge as the Makefile's image target does, builds
// the image from it, reads both outputs back with go-containerregistry's
// readers, checks the config, and runs the capbridge it extracts from the
// layer.
func TestImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "capbridge")
	gobuild := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/capbridge")
	gobuild.Dir = "../.."
	gobuild.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := gobuild.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	img, b, err := build(spec{Binary: bin, CACerts: ca})
	if err != nil {
		t.Fatal(err)
	}
	tarPath, ociDir := filepath.Join(dir, "image.tar"), filepath.Join(dir, "oci")
	if err := write(img, "capbridge:"+tagSafe(b.version), tarPath, ociDir); err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}

	// Read back: the tarball, as docker load and crane read it, and the
	// OCI layout, by its index and the tag annotation.
	fromTar, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(ociDir)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != tagSafe(b.version) {
		t.Fatalf("OCI layout index: %+v; want one image named %s", im.Manifests, tagSafe(b.version))
	}
	fromOCI, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := fromOCI.Digest(); err != nil || d != want {
		t.Errorf("OCI layout: digest %s, %v; built %s", d, err, want)
	}
	// A docker-load tarball carries the config and layers, not the
	// manifest (its reader writes a Docker one): those must match.
	for what, got := range map[string]v1.Image{"tarball": fromTar, "OCI layout": fromOCI} {
		if !sameContent(t, got, img) {
			t.Errorf("%s: its config or layers differ from the image built", what)
		}
	}

	// The same binary gives the same image.
	again, _, err := build(spec{Binary: bin, CACerts: ca})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := again.Digest(); d != want {
		t.Errorf("a second build of the same binary is %s, the first %s: the image is not reproducible", d, want)
	}

	cf, err := fromTar.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	// A build in a git clone names its commit (Go does not stamp one in
	// a git worktree, whose .git is a file).
	rev := b.revision
	c := cf.Config
	switch {
	case c.User != "65532:65532":
		t.Errorf("User %q; want 65532:65532, never root", c.User)
	case !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/capbridge"}) || !slices.Equal(c.Cmd, []string{"serve"}):
		t.Errorf("Entrypoint %q Cmd %q; want capbridge serve", c.Entrypoint, c.Cmd)
	case c.WorkingDir != "/home/nonroot":
		t.Errorf("WorkingDir %q", c.WorkingDir)
	case cf.OS != "linux" || cf.Architecture == "":
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	case c.Labels["org.opencontainers.image.revision"] != rev:
		t.Errorf("revision label %q; the binary's commit is %q", c.Labels["org.opencontainers.image.revision"], rev)
	case c.Labels["org.opencontainers.image.version"] != b.version || b.version == "":
		t.Errorf("version label %q, the binary's %q", c.Labels["org.opencontainers.image.version"], b.version)
	case !slices.Contains(c.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"):
		t.Errorf("Env %q names no CA bundle", c.Env)
	}

	files := layerFiles(t, fromTar)
	for name, want := range map[string]struct {
		mode int64
		uid  int
	}{
		"usr/local/bin/capbridge":           {0o755, 0},
		"home/nonroot/":                     {0o700, 65532},
		"tmp/":                              {0o1777, 0},
		"etc/passwd":                        {0o644, 0},
		"etc/ssl/certs/ca-certificates.crt": {0o644, 0},
	} {
		f, ok := files[name]
		if !ok {
			t.Errorf("the layer has no %s", name)
			continue
		}
		if f.hdr.Mode != want.mode || f.hdr.Uid != want.uid {
			t.Errorf("%s: mode %o uid %d; want %o uid %d", name, f.hdr.Mode, f.hdr.Uid, want.mode, want.uid)
		}
	}
	if !bytes.Contains(files["etc/passwd"].data, []byte("\nnonroot:x:65532:65532:nonroot:/home/nonroot:")) {
		t.Errorf("etc/passwd names no user 65532:\n%s", files["etc/passwd"].data)
	}

	// Run the capbridge the layer carries: its version names the commit,
	// and doctor boots and stops the built-in demo server with it.
	extracted := filepath.Join(dir, "extracted-capbridge")
	if err := os.WriteFile(extracted, files["usr/local/bin/capbridge"].data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(extracted, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "capbridge ") || !strings.Contains(string(out), rev) || !strings.Contains(string(out), strings.Trim(b.version, "()")) {
		t.Errorf("extracted capbridge version: %v\n%s\nwant %s and commit %q", err, out, b.version, rev)
	}
	run := t.TempDir()
	doctor := exec.Command(extracted, "doctor")
	doctor.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+run)
	if out, err := doctor.CombinedOutput(); err != nil || !strings.Contains(string(out), "all checks passed") {
		t.Errorf("extracted capbridge doctor: %v\n%s", err, out)
	}
}

// A binary that is not capbridge, or not one the empty base can run, is
// refused with the build command that makes one.
func TestImageRefusesOtherBinaries(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := build(spec{Binary: self}); err == nil || !strings.Contains(err.Error(), mainPath) {
		t.Errorf("built an image from the test binary (%v); want a refusal naming %s", err, mainPath)
	}
	if _, _, err := build(spec{Binary: filepath.Join(t.TempDir(), "none")}); err == nil || !strings.Contains(err.Error(), "go build") {
		t.Errorf("a missing binary: %v; want the build command", err)
	}
}

// The Dockerfile's final stage builds the image deploy/image builds: the
// same user, entrypoint, command and working directory, on distroless's
// nonroot static base.
func TestDockerfileMatches(t *testing.T) {
	f, err := os.Open("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var final []string // the last stage's instructions
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "FROM ") {
			final = nil
		}
		final = append(final, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"COPY --from=build /out/capbridge " + binPath,
		"USER " + user,
		"WORKDIR " + home,
		`ENTRYPOINT ["` + binPath + `"]`,
		`CMD ["serve"]`,
	} {
		if !slices.Contains(final, want) {
			t.Errorf("the Dockerfile's final stage lacks %q:\n%s", want, strings.Join(final, "\n"))
		}
	}
}

type layerFile struct {
	hdr  *tar.Header
	data []byte
}

// layerFiles reads the image's only layer.
func layerFiles(t *testing.T, img v1.Image) map[string]layerFile {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v; want one", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]layerFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = layerFile{h, data}
	}
}

// sameContent reports whether a and b have the same config and layers.
func sameContent(t *testing.T, a, b v1.Image) bool {
	t.Helper()
	ids := func(img v1.Image) []v1.Hash {
		cn, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		ids := []v1.Hash{cn}
		for _, l := range layers {
			d, err := l.Digest()
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, d)
		}
		return ids
	}
	return slices.Equal(ids(a), ids(b))
}

func TestTagSafe(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.3":  "v1.2.3",
		"(devel)": "devel",
		"v1.2.4-0.20261204205521-0123456789ab+dirty": "v1.2.4-0.20261204205521-0123456789ab-dirty",
		"": "devel",
	} {
		if got := tagSafe(in); got != want {
			t.Errorf("tagSafe(%q) = %q; want %q", in, got, want)
		}
	}
}

// Command image builds capbridge's container image from a static Linux
// capbridge binary, without a container daemon or a registry: one layer on
// an empty base (capbridge, a passwd naming the non-root user 65532, a CA
// bundle, /tmp), written as a tarball that `docker load` and `podman load`
// read and `crane push` uploads, and optionally as an OCI image layout.
//
// It is its own module so that go-containerregistry, which only this tool
// needs, stays out of capbridge's module graph and binary.
//
// Usage (the Makefile's image target runs it):
//
//	CGO_ENABLED=0 GOOS=linux go build -trimpath -o bin/capbridge-linux ./cmd/capbridge
//	cd deploy/image && go run . -binary ../../bin/capbridge-linux -o ../../bin/capbridge-image.tar
package main

import (
	"archive/tar"
	"bytes"
	"cmp"
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's layout and identity. The Dockerfile at the repository's root
// builds the same shape on distroless (a test holds the two together).
const (
	binPath    = "/usr/local/bin/capbridge"
	user       = "65532:65532" // distroless's nonroot; never root
	uid        = 65532
	home       = "/home/nonroot"
	caBundle   = "/etc/ssl/certs/ca-certificates.crt"
	mainPath   = "github.com/capbridge/capbridge/cmd/capbridge"
	sourceRepo = "https://github.com/capbridge/capbridge"
)

func main() {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var s spec
	fs.StringVar(&s.Binary, "binary", "", "a static Linux capbridge (CGO_ENABLED=0 GOOS=linux go build ./cmd/capbridge); required")
	fs.StringVar(&s.CACerts, "ca-certs", caBundle, "a PEM bundle of the CAs remote servers are checked against, copied to "+caBundle+" (\"\" for none)")
	out := fs.String("o", "", "write the image as a tarball for docker load, podman load or crane push")
	oci := fs.String("oci", "", "write the image as an OCI image layout in this directory, which must not exist")
	tag := fs.String("tag", "", "the image's name (default capbridge:VERSION, from the binary's build info)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if s.Binary == "" || (*out == "" && *oci == "") || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: image -binary PATH [-o IMAGE.tar] [-oci DIR] [-tag NAME:TAG] [-ca-certs PEM]; -binary and one of -o or -oci are required")
		os.Exit(2)
	}
	img, b, err := build(s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	if *tag == "" {
		*tag = "capbridge:" + tagSafe(b.version)
	}
	if err := write(img, *tag, *out, *oci); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	digest, err := img.Digest()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	for _, p := range []string{*out, *oci} {
		if p != "" {
			fmt.Printf("wrote %s: %s %s (linux/%s, user %s, capbridge %s)\n", p, *tag, digest, b.arch, user, b.version)
		}
	}
}

// spec is what an image is built from.
type spec struct {
	Binary  string // a static Linux capbridge
	CACerts string // a PEM bundle to carry, or ""
}

// binInfo is what the binary's build info says about it.
type binInfo struct {
	version, revision, arch string
	created                 time.Time // the commit's time: files and config carry it, so a rebuild of the same commit is the same image
}

// readBinary reads the build info of the binary at p and refuses one that
// cannot run on an empty base: not capbridge, not Linux, or linked with
// cgo (it would need a libc the image does not have).
func readBinary(p string) (binInfo, error) {
	bi, err := buildinfo.ReadFile(p)
	if err != nil {
		return binInfo{}, fmt.Errorf("%s: %w (build it with go build ./cmd/capbridge)", p, err)
	}
	if bi.Path != mainPath {
		return binInfo{}, fmt.Errorf("%s is %s, not %s", p, bi.Path, mainPath)
	}
	b := binInfo{version: bi.Main.Version, created: time.Unix(0, 0).UTC()}
	set := map[string]string{}
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	switch {
	case set["GOOS"] != "linux":
		return binInfo{}, fmt.Errorf("%s is built for GOOS=%s; build it with GOOS=linux", p, set["GOOS"])
	case set["CGO_ENABLED"] != "0":
		return binInfo{}, fmt.Errorf("%s is linked with cgo, and the image has no libc; build it with CGO_ENABLED=0", p)
	}
	b.arch, b.revision = set["GOARCH"], set["vcs.revision"]
	if t, err := time.Parse(time.RFC3339, set["vcs.time"]); err == nil {
		b.created = t.UTC()
	}
	if b.version == "" {
		b.version = "(devel)"
	}
	return b, nil
}

// build makes the image: one layer on an empty base, and a config that
// runs capbridge as the non-root user.
func build(s spec) (v1.Image, binInfo, error) {
	b, err := readBinary(s.Binary)
	if err != nil {
		return nil, b, err
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, b, err
	}
	var ca []byte
	if s.CACerts != "" {
		if ca, err = os.ReadFile(s.CACerts); err != nil {
			return nil, b, fmt.Errorf("the CA bundle: %w (install Debian's ca-certificates, name another with -ca-certs, or -ca-certs \"\" for an image that reaches no HTTPS server)", err)
		}
	}
	files, err := layerTar(b.created, bin, ca)
	if err != nil {
		return nil, b, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(files)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, b, err
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   v1.Time{Time: b.created},
		CreatedBy: "capbridge deploy/image",
		Comment:   "capbridge " + b.version,
	}})
	if err != nil {
		return nil, b, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, b, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", b.arch, v1.Time{Time: b.created}
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	if ca != nil {
		env = append(env, "SSL_CERT_FILE="+caBundle)
	}
	cf.Config = v1.Config{
		User:       user,
		Entrypoint: []string{binPath},
		Cmd:        []string{"serve"},
		WorkingDir: home,
		Env:        env,
		Labels:     labels(b),
	}
	img, err = mutate.ConfigFile(img, cf)
	return img, b, err
}

// labels are the OCI annotations' pre-defined keys that apply.
func labels(b binInfo) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "capbridge",
		"org.opencontainers.image.description": "lets sandboxed, model-written programs call MCP tools through typed façades over a Unix socket",
		"org.opencontainers.image.source":      sourceRepo,
		"org.opencontainers.image.version":     b.version,
		"org.opencontainers.image.created":     b.created.Format(time.RFC3339),
	}
	if b.revision != "" {
		l["org.opencontainers.image.revision"] = b.revision
	}
	return l
}

// layerTar returns the layer's files as a tar stream, in a fixed order
// with fixed times and owners, so that the same inputs give the same
// layer digest.
func layerTar(mtime time.Time, bin, ca []byte) ([]byte, error) {
	type entry struct {
		name string
		mode int64
		uid  int
		data []byte // nil for a directory
	}
	entries := []entry{
		{"etc/", 0o755, 0, nil},
		// The user exists, so that whatever looks it up (os/user, a
		// server capbridge starts) finds a name and a home.
		{"etc/group", 0o644, 0, []byte("root:x:0:\nnonroot:x:65532:\n")},
		{"etc/passwd", 0o644, 0, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:" + home + ":/sbin/nologin\n")},
		{"home/", 0o755, 0, nil},
		{strings.TrimPrefix(home, "/") + "/", 0o700, uid, nil},
		// Sticky, as /tmp is everywhere: serve's default sockets go to
		// /tmp/capbridge-65532 when $XDG_RUNTIME_DIR is unset.
		{"tmp/", 0o1777, 0, nil},
		{"usr/", 0o755, 0, nil},
		{"usr/local/", 0o755, 0, nil},
		{"usr/local/bin/", 0o755, 0, nil},
		{strings.TrimPrefix(binPath, "/"), 0o755, 0, bin},
	}
	if ca != nil {
		entries = append(entries,
			entry{"etc/ssl/", 0o755, 0, nil},
			entry{"etc/ssl/certs/", 0o755, 0, nil},
			entry{strings.TrimPrefix(caBundle, "/"), 0o644, 0, ca})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: mtime, Format: tar.FormatPAX}
		if e.data == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// write writes img as a tarball at out and as an OCI layout in oci, each
// when named.
func write(img v1.Image, tag, out, oci string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("-tag %q: %w", tag, err)
	}
	if out != "" {
		if err := tarball.WriteToFile(out, ref, img); err != nil {
			return err
		}
	}
	if oci != "" {
		if _, err := os.Stat(oci); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("-oci %s: it exists; name a new directory", oci)
		}
		p, err := layout.Write(oci, empty.Index)
		if err != nil {
			return err
		}
		// The reference's tag, as tools that read a layout (podman,
		// skopeo's oci:DIR:TAG) name an image in it.
		return p.AppendImage(img, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": ref.TagStr(),
		}))
	}
	return nil
}

// notInTag matches what an image tag may not hold ([A-Za-z0-9_.-] only).
var notInTag = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// tagSafe turns a module version into a valid image tag: "+" (semver's
// build metadata, such as +dirty) and "(devel)"'s parentheses are not
// allowed there.
func tagSafe(v string) string {
	v = strings.Trim(v, "()")
	v = notInTag.ReplaceAllString(v, "-")
	if len(v) > 128 {
		v = v[:128]
	}
	return cmp.Or(v, "devel")
}

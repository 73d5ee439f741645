package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/capbridge/capbridge/bridge/config"
)

// podManifest is deploy/kubernetes/sandbox-pod.yaml, which
// docs/operating.md shows.
const podManifest = "../../deploy/kubernetes/sandbox-pod.yaml"

// The fields of Kubernetes objects the manifest uses, under Kubernetes's
// names. Decoding with KnownFields refuses any other, so a misspelt key
// (readonly for readOnly), which a cluster would silently ignore, fails
// the test.
type (
	k8sObject struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string
		Metadata   struct {
			Name   string
			Labels map[string]string
		}
		Data map[string]string
		Spec *podSpec
	}
	podSpec struct {
		AutomountServiceAccountToken *bool `yaml:"automountServiceAccountToken"`
		SecurityContext              struct {
			RunAsNonRoot   *bool                 `yaml:"runAsNonRoot"`
			SeccompProfile struct{ Type string } `yaml:"seccompProfile"`
		} `yaml:"securityContext"`
		Volumes        []k8sVolume
		InitContainers []k8sContainer `yaml:"initContainers"`
		Containers     []k8sContainer
	}
	k8sVolume struct {
		Name     string
		EmptyDir *struct {
			Medium    string
			SizeLimit string `yaml:"sizeLimit"`
		} `yaml:"emptyDir"`
		ConfigMap *struct{ Name string } `yaml:"configMap"`
	}
	k8sEnv struct {
		Name      string
		Value     string
		ValueFrom *struct {
			SecretKeyRef struct{ Name, Key string } `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	}
	k8sContainer struct {
		Name, Image     string
		Command, Args   []string
		Env             []k8sEnv
		SecurityContext struct {
			RunAsUser                *int64 `yaml:"runAsUser"`
			RunAsGroup               *int64 `yaml:"runAsGroup"`
			RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
			AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
			Capabilities             struct{ Drop, Add []string }
		} `yaml:"securityContext"`
		ReadinessProbe *struct {
			Exec          struct{ Command []string }
			PeriodSeconds int `yaml:"periodSeconds"`
		} `yaml:"readinessProbe"`
		Resources struct {
			Requests, Limits map[string]string
		}
		VolumeMounts []struct {
			Name      string
			MountPath string `yaml:"mountPath"`
			ReadOnly  bool   `yaml:"readOnly"`
		} `yaml:"volumeMounts"`
	}
)

// readPod reads the manifest: the pod and the capbridge.toml its
// ConfigMap carries.
func readPod(t *testing.T) (*podSpec, []byte) {
	t.Helper()
	data, err := os.ReadFile(podManifest)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var pod *podSpec
	var toml []byte
	for {
		var o k8sObject
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", podManifest, err)
		}
		switch {
		case o.APIVersion == "v1" && o.Kind == "ConfigMap" && o.Metadata.Name == "capbridge":
			toml = []byte(o.Data["capbridge.toml"])
		case o.APIVersion == "v1" && o.Kind == "Pod" && o.Spec != nil:
			pod = o.Spec
		default:
			t.Fatalf("%s: unexpected object %s %s %q", podManifest, o.APIVersion, o.Kind, o.Metadata.Name)
		}
	}
	if pod == nil || len(toml) == 0 {
		t.Fatalf("%s: want a Pod and a ConfigMap capbridge with capbridge.toml", podManifest)
	}
	return pod, toml
}

func (p *podSpec) container(t *testing.T, name string) k8sContainer {
	t.Helper()
	i := slices.IndexFunc(p.Containers, func(c k8sContainer) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("the pod has no container %s", name)
	}
	return p.Containers[i]
}

// mountOf returns the volume c mounts at dir, and whether read-only.
func (c k8sContainer) mountOf(dir string) (volume string, readOnly bool) {
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			return m.Name, m.ReadOnly
		}
	}
	return "", false
}

func (c k8sContainer) env(name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// The sidecar layout docs/operating.md describes, as the manifest lays it
// out: capbridge runs as 65532 without privileges; the call socket's
// directory is a volume the sandbox mounts read-only, and the sandbox's
// uid may connect; the control socket's volume is never the sandbox's;
// the init container gives both directories to capbridge's user with the
// modes capbridge's socket checks accept; the config parses.
func TestPodManifest(t *testing.T) {
	pod, toml := readPod(t)
	// The pod gives capbridge the token from a Secret.
	t.Setenv("GITHUB_MCP_TOKEN", "test")
	cfg, err := config.Load("capbridge.toml", toml)
	if err != nil {
		t.Fatalf("the ConfigMap's capbridge.toml: %v", err)
	}
	callDir, controlDir := filepath.Dir(cfg.Bridge.CallSocket), filepath.Dir(cfg.Bridge.ControlSocket)
	cb, harness, sandbox := pod.container(t, "capbridge"), pod.container(t, "harness"), pod.container(t, "sandbox")

	sc := cb.SecurityContext
	if sc.RunAsUser == nil || *sc.RunAsUser != 65532 || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("capbridge's securityContext %+v: want uid 65532, no privilege escalation, a read-only root, no capabilities", sc)
	}
	for _, s := range cfg.Servers {
		if r := s.Remote; r != nil && r.BearerTokenEnv != "" &&
			!slices.ContainsFunc(cb.Env, func(e k8sEnv) bool {
				return e.Name == r.BearerTokenEnv && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef.Key != ""
			}) {
			t.Errorf("server %s reads $%s, which capbridge's container does not take from a Secret", s.Name, r.BearerTokenEnv)
		}
	}
	if pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("the pod does not require non-root containers")
	}
	if len(cb.Args) < 3 || cb.Args[0] != "serve" || cb.Args[1] != "-c" {
		t.Fatalf("capbridge's args %q: want serve -c CONFIG", cb.Args)
	}
	if v, _ := cb.mountOf(filepath.Dir(cb.Args[2])); v == "" || slices.IndexFunc(pod.Volumes, func(vol k8sVolume) bool {
		return vol.Name == v && vol.ConfigMap != nil && vol.ConfigMap.Name == "capbridge"
	}) < 0 {
		t.Errorf("capbridge reads %s, which is not on the ConfigMap's volume", cb.Args[2])
	}

	callVol, _ := cb.mountOf(callDir)
	controlVol, _ := cb.mountOf(controlDir)
	if callVol == "" || controlVol == "" || callVol == controlVol {
		t.Fatalf("capbridge mounts %q at the call socket's directory %s and %q at the control socket's %s: want two volumes", callVol, callDir, controlVol, controlDir)
	}
	if v, ro := sandbox.mountOf(callDir); v != callVol || !ro {
		t.Errorf("the sandbox mounts %q (read-only %v) at %s; want %s, read-only", v, ro, callDir, callVol)
	}
	if got := sandbox.env("CAPBRIDGE_SOCKET"); got != cfg.Bridge.CallSocket {
		t.Errorf("the sandbox's CAPBRIDGE_SOCKET is %q; the call socket is %s", got, cfg.Bridge.CallSocket)
	}
	for _, m := range sandbox.VolumeMounts {
		if m.Name == controlVol {
			t.Errorf("the sandbox mounts the control socket's volume at %s", m.MountPath)
		}
	}
	uid := sandbox.SecurityContext.RunAsUser
	if uid == nil || *uid == 65532 || !slices.Contains(cfg.Bridge.AllowedUIDs, uint32(*uid)) || cfg.Bridge.CallSocketMode&0o002 == 0 {
		t.Errorf("the sandbox's uid %v must differ from capbridge's, be in allowed_uids %v, and the call socket's mode %04o let others connect",
			uid, cfg.Bridge.AllowedUIDs, cfg.Bridge.CallSocketMode)
	}
	if v, _ := harness.mountOf(controlDir); v != controlVol || harness.env(envControl) != cfg.Bridge.ControlSocket ||
		harness.SecurityContext.RunAsUser == nil || *harness.SecurityContext.RunAsUser != 65532 {
		t.Errorf("the harness must mount %s at %s, run as 65532 and set %s=%s", controlVol, controlDir, envControl, cfg.Bridge.ControlSocket)
	}
	if p := cb.ReadinessProbe; p == nil || !slices.Contains(p.Exec.Command, cfg.Bridge.ControlSocket) {
		t.Errorf("capbridge's readiness probe does not ask the control socket %s", cfg.Bridge.ControlSocket)
	}

	if len(pod.InitContainers) != 1 {
		t.Fatalf("%d init containers; want the one that prepares the socket directories", len(pod.InitContainers))
	}
	init := pod.InitContainers[0]
	script := strings.Join(init.Command, " ")
	for dir, mode := range map[string]string{callDir: "0711", controlDir: "0700"} {
		if !strings.Contains(script, "chmod "+mode+" "+dir) || !strings.Contains(script, "chown 65532:65532 "+dir) {
			t.Errorf("the init container does not give %s to 65532 with mode %s: %s", dir, mode, script)
		}
		if v, _ := init.mountOf(dir); v == "" {
			t.Errorf("the init container does not mount %s", dir)
		}
	}
}

// The manifest's capbridge.toml and serve arguments, served for real on
// directories as the init container leaves them: both sockets open with
// the modes the layout relies on, and the readiness probe's command
// answers.
func testPodConfig(t *testing.T, bin string) {
	pod, toml := readPod(t)
	cb := pod.container(t, "capbridge")
	root := shortTempDir(t)
	for dir, mode := range map[string]os.FileMode{"call": 0o711, "control": 0o700} {
		if err := os.Mkdir(filepath.Join(root, dir), mode); err != nil {
			t.Fatal(err)
		}
	}
	// The pod's /run/capbridge/ is root here; no server is reachable
	// from a test, and a server that fails to boot is retried while the
	// sockets serve.
	toml = bytes.ReplaceAll(toml, []byte("/run/capbridge/"), []byte(root+"/"))
	cfgPath := filepath.Join(root, "capbridge.toml")
	if err := os.WriteFile(cfgPath, toml, 0o644); err != nil {
		t.Fatal(err)
	}
	args := slices.Clone(cb.Args)
	args[2] = cfgPath
	srv, line := startServe(t, bin, []string{"GITHUB_MCP_TOKEN=test"}, append(args, "--ready-when=sockets")...)
	call, control := filepath.Join(root, "call", "call.sock"), filepath.Join(root, "control", "control.sock")
	if !strings.Contains(line, `"call_socket":"`+call+`"`) || !strings.Contains(line, `"control_socket":"`+control+`"`) {
		t.Fatalf("ready line %s; want the sockets under %s", line, root)
	}
	for path, want := range map[string]os.FileMode{call: 0o666, filepath.Dir(call): 0o711, filepath.Dir(control): 0o700} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %04o", path, fi.Mode().Perm(), err, want)
		}
	}
	probe := slices.Clone(cb.ReadinessProbe.Exec.Command)
	for i, a := range probe {
		probe[i] = strings.ReplaceAll(a, "/run/capbridge/", root+"/")
	}
	if _, stderr, code := runCLI(t, bin, nil, probe[1:]...); code != 0 {
		t.Errorf("the readiness probe %q: exit %d, %s", probe, code, stderr)
	}
	if rest, err := srv.stop(); err != nil || len(rest) != 0 {
		t.Fatalf("serve after SIGTERM: %v, more stdout %q; stderr:\n%s", err, rest, srv.stderr.String())
	}
}

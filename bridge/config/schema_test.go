package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/capbridge.schema.json from the config definition")

const (
	schemaPath = "../../docs/capbridge.schema.json"
	samplePath = "../../docs/capbridge.sample.toml"
)

// docs/capbridge.schema.json is what JSONSchema generates; go test
// -update rewrites it after the definition changes.
func TestSchemaFile(t *testing.T) {
	want, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(schemaPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what the config definition generates; run go test ./bridge/config -run TestSchemaFile -update", schemaPath)
	}
}

// The sample config parses, points at the schema, and sets every key the
// definition (and so the schema) has, so that a key the reader does not
// take, or one the sample leaves undocumented, fails here.
func TestSampleConfig(t *testing.T) {
	data, err := os.ReadFile(samplePath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "#:schema ./capbridge.schema.json\n") {
		t.Errorf("%s does not start with its #:schema line", samplePath)
	}
	// A secret file must be readable when the config is loaded: the
	// sample's stands in for one on this machine.
	secret := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(secret, []byte("t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(samplePath, bytes.ReplaceAll(data, []byte("/run/secrets/github-mcp-token"), []byte(secret)))
	if err != nil {
		t.Fatalf("the sample does not load:\n%v", err)
	}
	if len(cfg.Servers) == 0 || cfg.Bridge.ControlSocket == "" {
		t.Errorf("sample loaded as %+v", cfg)
	}
	pos := indexPositions(data)
	for _, k := range bridgeSpec {
		if pos["bridge."+k.name] == 0 {
			t.Errorf("the sample does not set bridge.%s", k.name)
		}
	}
	for _, k := range telemetrySpec {
		if pos["telemetry."+k.name] == 0 {
			t.Errorf("the sample does not set telemetry.%s", k.name)
		}
	}
	for _, k := range serverSpec {
		if pos["mcp.memory."+k.name] == 0 {
			t.Errorf("the sample's [mcp.memory] does not set %s", k.name)
		}
	}
}

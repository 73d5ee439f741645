package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

func TestMain(m *testing.M) {
	rawecho.MaybeServe() // the bridges' servers are this test binary
	maybeFloor()         // and so is the conns cell's floor relay
	os.Exit(m.Run())
}

// TestQuick runs every cell once in -quick mode, capbridge built from
// this repository, and checks that each output parses, every cell has
// its samples and every goal its measurement. It asserts nothing about
// the numbers' size but the soak's: every call answered.
func TestQuick(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"-quick", "-runs", "1", "-cells", "conns,memory,servers,big,soak", "-out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	if len(rep.Conns) != 2*len(quickPlan.conns) || len(rep.Memory) != 1 || len(rep.Servers) != len(quickPlan.servers) || len(rep.Big) != len(quickPlan.bigTools) || rep.Soak == nil {
		t.Fatalf("samples missing: %+v", rep)
	}
	floors := 0
	for _, s := range rep.Conns {
		if s.N != quickPlan.callsPerN || s.CallsPerS <= 0 || s.P99us < s.P50us || s.BridgeCPUus <= 0 || s.ServerCPUus <= 0 || s.ClientCPUus <= 0 {
			t.Errorf("conns %d: %+v", s.Conns, s)
		}
		if s.Floor {
			floors++
		}
	}
	if floors != len(quickPlan.conns) {
		t.Errorf("%d floor samples, want one per count of connections", floors)
	}
	if m := rep.Memory[0]; m.RSSBase <= 0 || m.RSSIdle <= 0 {
		t.Errorf("memory: %+v", m)
	}
	for _, s := range rep.Servers {
		if s.ReadyMS <= 0 || s.RSS <= 0 || s.BridgeCPUms <= 0 || s.LaunchMS <= 0 {
			t.Errorf("servers %d: %+v", s.Servers, s)
		}
	}
	for _, s := range rep.Big {
		if s.ReadyAfterMS <= 0 || s.RSS <= 0 || s.P50us <= 0 || s.P50SmallUs <= 0 || len(s.GenerateMS) != 3 {
			t.Errorf("big %d: %+v", s.Tools, s)
		}
	}
	if s := rep.Soak; s.Results+s.Denials != int64(s.Calls) || s.Unanswered != 0 || s.Kills == 0 || len(s.Points) < 2 {
		t.Errorf("soak: %+v", s)
	}
	ids := map[string]int{}
	for _, g := range rep.Goals {
		if !g.Measured {
			t.Errorf("goal %s %q not measured", g.ID, g.What)
		}
		ids[g.ID]++
	}
	if ids["5"] != 2 || ids["6"] != 2 || ids["7"] != 2 || ids["8"] != 6 || ids["9"] != 4 {
		t.Errorf("goals: %v", ids)
	}
	md, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Connections (cell 5)", "## Memory (cell 6)", "## Servers (cell 7)", "## Big listings (cell 8)", "## Soak (cell 9)", "## Goals"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q", want)
		}
	}
	for _, name := range []string{"conns", "memory", "servers", "big"} {
		svg, err := os.ReadFile(filepath.Join(out, name+".svg"))
		if err != nil {
			t.Fatal(err)
		}
		points := 0
		dec := xml.NewDecoder(bytes.NewReader(svg))
		for {
			tok, err := dec.Token()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s.svg is not XML: %v", name, err)
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "circle" {
				points++
			}
		}
		if points == 0 {
			t.Errorf("%s.svg has no points", name)
		}
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{"-cells", "nope"}, {"-runs", "0"}, {"extra"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 2 {
			t.Errorf("run(%q) = %d, want 2; stderr %q", args, code, stderr.String())
		}
	}
}

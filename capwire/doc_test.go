package capwire

import (
	"bytes"
	"encoding/hex"
	"os"
	"reflect"
	"strings"
	"testing"
)

const specPath = "../docs/capwire.md"

// specFrames returns the hex blocks of the spec's worked example, by name
// (```capwire-frame NAME), with "# ..." comments stripped.
func specFrames(t *testing.T) map[string][]byte {
	t.Helper()
	doc, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	var name string
	var buf strings.Builder
	for line := range strings.Lines(string(doc)) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "```capwire-frame "):
			name = strings.TrimPrefix(line, "```capwire-frame ")
			buf.Reset()
		case name != "" && line == "```":
			b, err := hex.DecodeString(buf.String())
			if err != nil {
				t.Fatalf("block %q: %v", name, err)
			}
			out[name] = b
			name = ""
		case name != "":
			if i := strings.IndexByte(line, '#'); i >= 0 {
				line = line[:i]
			}
			buf.WriteString(strings.ReplaceAll(line, " ", ""))
		}
	}
	return out
}

// The worked example in docs/capwire.md is what the code reads and writes,
// byte for byte.
func TestSpecWorkedExample(t *testing.T) {
	frames := specFrames(t)
	want := map[string]Message{
		"call": &CallMsg{ID: 1, Cap: "mcp.github", Op: "create_issue", TimeoutMS: 30000,
			Args: m("title", "Crash on start", "labels", arr("bug"))},
		"result": &ResultMsg{ID: 1, Result: Result{
			Content:    []Block{{Type: BlockText, Kind: KindText, Text: "Created issue #42"}, {Type: BlockOther, Kind: "image"}},
			Structured: m("number", 42),
		}},
	}
	if len(frames) != len(want) {
		t.Fatalf("spec has frames %v, want %d", reflect.ValueOf(frames).MapKeys(), len(want))
	}
	for name, msg := range want {
		frame, ok := frames[name]
		if !ok {
			t.Fatalf("spec has no %q frame", name)
		}
		payload, err := NewFrameReader(bytes.NewReader(frame), 0).ReadFrame(nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := Decode(payload)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, msg) {
			t.Errorf("%s decodes to %#v, want %#v", name, got, msg)
		}
		enc, err := AppendFrame(nil, msg, 0)
		if err != nil || !bytes.Equal(enc, frame) {
			t.Errorf("%s encodes to\n%x\nthe spec shows\n%x (%v)", name, enc, frame, err)
		}
	}
}

// The spec's code tables list exactly the codes in codes.go, with the same
// retry verdicts.
func TestSpecCodeTables(t *testing.T) {
	doc, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for line := range strings.Lines(string(doc)) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		// A code row: | `code` | when | retry |
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		code := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if listed[code] {
			t.Errorf("code %q listed twice", code)
		}
		listed[code] = true
		if _, ok := codes[code]; !ok {
			t.Errorf("spec lists %q, which the code does not know", code)
			continue
		}
		if yes := strings.HasPrefix(strings.TrimSpace(cells[3]), "yes"); yes != Retryable(code) {
			t.Errorf("%s: spec says retry %q, Retryable says %v", code, strings.TrimSpace(cells[3]), Retryable(code))
		}
	}
	for code := range codes {
		if !listed[code] {
			t.Errorf("code %q is not in the spec's tables", code)
		}
	}
}

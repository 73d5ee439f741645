package codegen

import (
	"strings"
	"testing"
)

func TestToolProse(t *testing.T) {
	long := "Get a recursive tree view of files and directories as a JSON structure. " +
		"Each entry includes 'name', 'type' (file/directory), and 'children' for directories. " +
		"The output is formatted with 2-space indentation for readability. Only works within allowed directories."
	for _, tc := range []struct {
		name, desc    string
		limit, credit int
		want          string
	}{
		{name: "short enough", desc: "Echo the text.", limit: 72, want: `"Echo the text."`},
		{name: "plain cut at a sentence", desc: "First sentence here. Second sentence is long enough to be cut away.", limit: 30, want: `"First sentence here.…"`},
		{name: "deprecation leads, its marker dropped", desc: "Read the complete contents of a file as text. DEPRECATED: Use read_text_file instead.", limit: 72, credit: 10,
			want: `"Use read_text_file instead. Read the complete contents of a file as text."`},
		{name: "deprecation kept on the shortest rung", desc: "Read the complete contents of a file from disk as text, in any encoding. Deprecated: use read_text_file.", limit: 30,
			want: `"use read_text_file. Read the…"`},
		{name: "credit keeps what the tool returns", desc: long, limit: 72, credit: 40,
			want: `"Get a recursive tree view of… Each entry includes 'name', 'type' (file/directory), and 'children' for directories.…"`},
		{name: "no credit, no output sentence", desc: long, limit: 72,
			want: `"Get a recursive tree view of files and directories as a JSON structure.…"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tool := &Tool{Name: "x", Description: tc.desc}
			if got := toolProse(tool, detailFull, tc.limit, tc.credit); got != tc.want {
				t.Errorf("toolProse = %s\nwant        %s", got, tc.want)
			}
			if got := toolProse(tool, detailDescribe, tc.limit, tc.credit); !strings.Contains(got, strings.Fields(tc.desc)[0]) || strings.HasSuffix(got, `…"`) {
				t.Errorf("a description is cut: %s", got)
			}
		})
	}
}

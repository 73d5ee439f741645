package demoserver

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"io"
	"strings"
	"testing"
	"time"
)

// session runs Serve over pipes and exchanges lines with it.
type session struct {
	t    *testing.T
	in   *io.PipeWriter
	out  *bufio.Scanner
	done chan error
}

func start(t *testing.T) *session {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &session{t: t, in: inW, out: bufio.NewScanner(outR), done: make(chan error, 1)}
	s.out.Buffer(nil, 4<<20)
	clock := func() time.Time { return time.Date(2026, 12, 2, 13, 54, 27, 0, time.UTC) }
	go func() { s.done <- Serve(inR, outW, clock); outW.Close() }()
	t.Cleanup(func() {
		inW.Close()
		if err := <-s.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

type response struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (s *session) roundTrip(line string) response {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatal(err)
	}
	if !s.out.Scan() {
		s.t.Fatalf("no answer to %s: %v", line, s.out.Err())
	}
	var r response
	if err := json.Unmarshal(s.out.Bytes(), &r); err != nil {
		s.t.Fatalf("answer %q is not JSON: %v", s.out.Bytes(), err)
	}
	return r
}

type callResult struct {
	Content []struct {
		Type, Text, Data, MimeType string
	}
	StructuredContent json.RawMessage
	IsError           bool
}

func (s *session) call(tool, args string) callResult {
	s.t.Helper()
	r := s.roundTrip(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`)
	if r.Error != nil {
		s.t.Fatalf("%s: protocol error %+v", tool, r.Error)
	}
	var res callResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		s.t.Fatal(err)
	}
	return res
}

func TestHandshakeAndListing(t *testing.T) {
	s := start(t)
	for _, v := range []string{"2025-11-25", "2024-11-05", "1999-01-01"} {
		r := s.roundTrip(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + v + `","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`)
		var init struct {
			ProtocolVersion string
			ServerInfo      struct{ Name string }
		}
		_ = json.Unmarshal(r.Result, &init)
		want := v
		if v == "1999-01-01" {
			want = "2025-11-25"
		}
		if init.ProtocolVersion != want || init.ServerInfo.Name != "demo" {
			t.Errorf("initialize %s: got %s", v, r.Result)
		}
	}
	// A notification gets no answer: the next line read answers the ping.
	if _, err := io.WriteString(s.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	if r := s.roundTrip(`{"jsonrpc":"2.0","id":"p","method":"ping"}`); string(r.ID) != `"p"` || string(r.Result) != "{}" {
		t.Errorf("ping: %+v", r)
	}
	r := s.roundTrip(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	var list struct{ Tools []struct{ Name string } }
	_ = json.Unmarshal(r.Result, &list)
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "add,color_swatch,echo,now,sha256,word_count" {
		t.Errorf("tools = %v", names)
	}
}

func TestTools(t *testing.T) {
	s := start(t)
	for _, tc := range []struct {
		tool, args, text, structured string
	}{
		{"echo", `{"text":"héllo"}`, "héllo", ""},
		{"add", `{"a":2,"b":0.5}`, "2.5", `{"sum":2.5}`},
		{"sha256", `{"text":"abc"}`, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", ""},
		{"word_count", `{"text":"one two\nthree"}`, "2 lines, 3 words, 13 characters", `{"chars":13,"lines":2,"words":3}`},
		{"now", `{}`, "2026-12-02T13:54:27Z", `{"rfc3339":"2026-12-02T13:54:27Z","unix":1796219667}`},
		{"now", `{"timezone":"Asia/Tokyo"}`, "2026-12-02T22:54:27+09:00", ""},
	} {
		res := s.call(tc.tool, tc.args)
		if res.IsError || len(res.Content) != 1 || res.Content[0].Text != tc.text {
			t.Errorf("%s(%s) = %+v, want text %q", tc.tool, tc.args, res, tc.text)
		}
		if tc.structured != "" && string(res.StructuredContent) != tc.structured {
			t.Errorf("%s structured = %s, want %s", tc.tool, res.StructuredContent, tc.structured)
		}
	}

	res := s.call("color_swatch", `{"color":"#3366cc"}`)
	if len(res.Content) != 2 || res.Content[1].Type != "image" || res.Content[1].MimeType != "image/png" {
		t.Fatalf("color_swatch = %+v", res)
	}
	raw, _ := base64.StdEncoding.DecodeString(res.Content[1].Data)
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if r, g, b, _ := img.At(3, 5).RGBA(); r>>8 != 0x33 || g>>8 != 0x66 || b>>8 != 0xcc || img.Bounds().Dx() != 8 {
		t.Errorf("swatch pixel = %x %x %x", r>>8, g>>8, b>>8)
	}
}

// Bad arguments are tool errors the model can read, not protocol errors.
func TestToolErrors(t *testing.T) {
	s := start(t)
	for _, tc := range []struct{ tool, args, want string }{
		{"echo", `{}`, "echo takes text"},
		{"echo", `{"txt":"x"}`, "echo takes text"},
		{"add", `{"a":1}`, "two numbers"},
		{"add", `{"a":1e308,"b":1e308}`, "overflows"},
		{"color_swatch", `{"color":"red"}`, "not a #rrggbb color"},
		{"now", `{"timezone":"Mars/Olympus"}`, "unknown time zone"},
	} {
		res := s.call(tc.tool, tc.args)
		if !res.IsError || len(res.Content) != 1 || !strings.Contains(res.Content[0].Text, tc.want) {
			t.Errorf("%s(%s) = %+v, want an isError result mentioning %q", tc.tool, tc.args, res, tc.want)
		}
	}
}

func TestProtocolErrors(t *testing.T) {
	s := start(t)
	for _, tc := range []struct {
		line string
		code int
	}{
		{`not json`, -32700},
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, -32700},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/list"}`, -32601},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}`, -32602},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, -32602},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}` + strings.Repeat(" ", maxLine) + `}`, -32700},
		// The tail of an over-long line is not mistaken for a message.
		{strings.Repeat(" ", 2*maxLine) + `{"jsonrpc":"2.0","id":5,"method":"ping"}`, -32700},
	} {
		r := s.roundTrip(tc.line)
		if r.Error == nil || r.Error.Code != tc.code {
			t.Errorf("%.60s: got %+v, want error %d", tc.line, r, tc.code)
		}
	}
	// The loop survived all of that.
	if r := s.roundTrip(`{"jsonrpc":"2.0","id":9,"method":"ping"}`); r.Error != nil {
		t.Errorf("ping after errors: %+v", r.Error)
	}
}

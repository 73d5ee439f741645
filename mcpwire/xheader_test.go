package mcpwire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

func TestHeaderParams(t *testing.T) {
	for _, tc := range []struct{ name, schema, want, err string }{
		{"none", `{"type":"object","properties":{"a":{"type":"string"}}}`, "", ""},
		{"top and nested", `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"o":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}}}}`, "Region:region N:o.n", ""},
		{"under items", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}`, "", "not on a property reachable"},
		{"under anyOf", `{"type":"object","anyOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}`, "", "not on a property reachable"},
		{"at the root", `{"type":"object","x-mcp-header":"R"}`, "", "not on a property reachable"},
		{"number", `{"type":"object","properties":{"a":{"type":"number","x-mcp-header":"A"}}}`, "", "type is not string, integer or boolean"},
		{"untyped", `{"type":"object","properties":{"a":{"x-mcp-header":"A"}}}`, "", "type is not string, integer or boolean"},
		{"not a token", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A B"}}}`, "", "not an HTTP token"},
		{"empty", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":""}}}`, "", "not an HTTP token"},
		{"twice", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"K"},"b":{"type":"string","x-mcp-header":"k"}}}`, "", "used twice"},
		{"not a string", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":1}}}`, "", "is not a string"},
		{"under $defs", `{"type":"object","$defs":{"r":{"type":"string","x-mcp-header":"R"}},"properties":{"r":{"$ref":"#/$defs/r"}}}`, "", "not on a property reachable"},
		{"under not", `{"type":"object","not":{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}}`, "", "not on a property reachable"},
		{"items as a list", `{"type":"object","properties":{"a":{"type":"array","items":[{"type":"string","x-mcp-header":"A"}]}}}`, "", "not on a property reachable"},
		{"under dependencies", `{"type":"object","properties":{"a":{"type":"string"}},"dependencies":{"a":{"properties":{"b":{"type":"string","x-mcp-header":"B"}}},"c":["a"]}}`, "", "not on a property reachable"},
		{"under contentSchema", `{"type":"object","properties":{"a":{"type":"string","contentSchema":{"type":"object","properties":{"b":{"type":"string","x-mcp-header":"B"}}}}}}`, "", "not on a property reachable"},
		// Data, not schemas: a property of that name, instances.
		{"a property so named", `{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object","properties":{"x-mcp-header":{"type":"string"}}}}}}`, "", ""},
		{"in a default", `{"type":"object","properties":{"cfg":{"type":"object","default":{"x-mcp-header":"Region"}}}}`, "", ""},
		{"in const and enum", `{"type":"object","properties":{"a":{"const":{"x-mcp-header":1},"enum":[{"x-mcp-header":"X"}]}}}`, "", ""},
		{"a definition so named", `{"type":"object","$defs":{"x-mcp-header":{"type":"string"}}}`, "", ""},
		{"beside data", `{"type":"object","properties":{"r":{"type":"string","x-mcp-header":"R","examples":[{"x-mcp-header":2}]}}}`, "R:r", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps, err := headerParams([]byte(tc.schema))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.name+":"+strings.Join(p.path, "."))
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParamHeaders(t *testing.T) {
	ps := []headerParam{{"S", []string{"s"}}, {"I", []string{"o", "i"}}, {"B", []string{"b"}}, {"Absent", []string{"x"}}, {"Null", []string{"z"}}}
	got := map[string]string{}
	err := paramHeaders(ps, []byte(`{"s":"héllo","o":{"i":-7},"b":true,"z":null}`), func(k, v string) { got[k] = v })
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Mcp-Param-S": "=?base64?aMOpbGxv?=", "Mcp-Param-I": "-7", "Mcp-Param-B": "true"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	for in, out := range map[string]string{"us-west1": "us-west1", " padded ": "=?base64?IHBhZGRlZCA=?=", "line1\nline2": "=?base64?bGluZTEKbGluZTI=?=", "=?base64?literal?=": "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="} {
		if got := headerValue(in); got != out {
			t.Fatalf("headerValue(%q) = %q, want %q", in, got, out)
		}
	}
	if err := paramHeaders(ps[1:2], []byte(`{"o":{"i":9007199254740993}}`), func(string, string) {}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("an unsafe integer: %v", err)
	}
}

// TestSafeInteger: an integer is any JSON number with a zero fraction
// (JSON Schema), mirrored in plain decimal; its value is taken from the
// digits exactly, so the range's ends are not rounded across.
func TestSafeInteger(t *testing.T) {
	for in, want := range map[string]string{
		"42": "42", "-7": "-7", "0": "0", "-0": "0", "42.0": "42", "4.2e1": "42", "4.20E+1": "42",
		"1e2": "100", "0.0001e4": "1", "100e-2": "1", "0e999999999999": "0", "0.000": "0",
		"9007199254740991": "9007199254740991", "-9007199254740991": "-9007199254740991",
		"9007199254740991.000": "9007199254740991", "9.007199254740991e15": "9007199254740991",
		"9007199254740992": "", "1e16": "", "1.5": "", "42.01": "", "1e-1": "", "0.5e1": "5",
		"9007199254740991.0000000001": "", "1e999999999999999999": "", "1e-999999999999999999": "",
		"12345678901234567890": "",
	} {
		n, ok := safeInteger([]byte(in))
		got := ""
		if ok {
			got = strconv.FormatInt(n, 10)
		}
		if got != want {
			t.Errorf("safeInteger(%s) = %q, want %q", in, got, want)
		}
	}
}

// TestStreamableXMCPHeader: over Streamable HTTP in 2026-07-28 a tool's
// annotated arguments are mirrored into Mcp-Param headers, and a tool
// whose annotation is invalid is left out of the listing.
func TestStreamableXMCPHeader(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	listing := []json.RawMessage{
		json.RawMessage(`{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string","x-mcp-header":"Text"}}}}`),
		json.RawMessage(`{"name":"add","inputSchema":{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer","x-mcp-header":"A"}}}}}`),
	}
	face, url := httpServer(t, mcptest.Scenario{Era: mcptest.EraModernOnly, Tools: listing}, mcptest.HTTPOptions{})
	c := dial(t, url, Remote{}, Config{})
	tools, err := c.ListTools(context.Background())
	if err != nil || len(tools) != 1 || tools[0].Name != "echo" {
		t.Fatalf("ListTools = %v, %v", tools, err)
	}
	if d := c.Dropped(); len(d) != 1 || !strings.Contains(d["add"], "not on a property reachable") {
		t.Fatalf("Dropped() = %v", d)
	}
	echo(t, c, "héllo")
	if got := face.LastHeaders("POST tools/call").Get("Mcp-Param-Text"); got != "=?base64?aMOpbGxv?=" {
		t.Fatalf("Mcp-Param-Text = %q", got)
	}
	closeHTTP(t, c)
}

// FuzzHeaderParams: the x-mcp-header reader, which walks a schema a
// server sent, is total over any JSON: annotations or an error, never a
// panic; every annotation it accepts is a token with a non-empty path,
// tokenRE is RFC 9110's token, written apart from isToken: the fuzz
// target's oracle.
var tokenRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// TestIsToken holds isToken to tokenRE on every byte, alone and within
// a name.
func TestIsToken(t *testing.T) {
	for c := range 256 {
		b := string([]byte{byte(c)})
		for _, s := range []string{b, "a" + b + "b"} {
			if isToken(s) != tokenRE.MatchString(s) {
				t.Errorf("isToken(%q) = %v", s, isToken(s))
			}
		}
	}
	if isToken("") {
		t.Error(`isToken("")`)
	}
}

// and mirroring it from any arguments yields header-safe values.
func FuzzHeaderParams(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`,
		`{"type":"object","properties":{"o":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}}}}`,
		`{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}`,
		`{"properties":{"a":{"x-mcp-header":"a","type":"boolean"},"b":{"x-mcp-header":"A","type":"string"}}}`,
		`[{"x-mcp-header":1}]`, `"x"`, `{}`,
	} {
		f.Add([]byte(s), []byte(`{"region":"us-west1","o":{"n":7},"a":true}`))
	}
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		if !json.Valid(schema) || !json.Valid(args) {
			return
		}
		ps, err := headerParams(schema)
		if err != nil {
			return
		}
		for _, p := range ps {
			if !tokenRE.MatchString(p.name) || len(p.path) == 0 {
				t.Fatalf("accepted %+v", p)
			}
		}
		_ = paramHeaders(ps, args, func(k, v string) {
			for i := 0; i < len(v); i++ {
				if v[i] < 0x20 || v[i] >= 0x7f {
					t.Fatalf("header %s value %q is not plain visible ASCII", k, v)
				}
			}
		})
	})
}

// TestStreamableHeaderMismatch: a tool whose x-mcp-header annotations
// moved after the client listed it is refused -32020 HeaderMismatch; the
// client lists the tools again, once for every call refused on the old
// listing, tells its owner, and sends each call once more, now with the
// header. A listing that fails leaves the refusal as the answer.
func TestStreamableHeaderMismatch(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	plain := `{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string"}}}}`
	annotated := `{"name":"echo","inputSchema":{"type":"object","properties":{"text":{"type":"string","x-mcp-header":"Text"}}}}`
	relist := `{"name":"relist","inputSchema":{"type":"object"}}`
	face, url := httpServer(t, mcptest.Scenario{Era: mcptest.EraModernOnly,
		Tools:    []json.RawMessage{json.RawMessage(plain), json.RawMessage(relist)},
		Relisted: []json.RawMessage{json.RawMessage(annotated), json.RawMessage(relist)},
	}, mcptest.HTTPOptions{CheckParams: true})
	c := dial(t, url, Remote{}, Config{})
	if _, err := c.ListTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	echo(t, c, "before")
	if _, err := c.CallTool(context.Background(), "relist", JSONArgs([]byte(`{}`)), CallOptions{}); err != nil {
		t.Fatal(err)
	}
	lists := face.Requests("POST tools/list")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { echo(t, c, "after "+strconv.Itoa(i)) })
	}
	wg.Wait()
	if n := face.Requests("POST tools/list") - lists; n != 1 || face.Requests("POST mismatch") == 0 {
		t.Fatalf("%d re-listings for %d refusals, want 1", n, face.Requests("POST mismatch"))
	}
	if got := face.LastHeaders("POST tools/call").Get("Mcp-Param-Text"); !strings.HasPrefix(got, "after ") {
		t.Fatalf("Mcp-Param-Text = %q", got)
	}
	select {
	case <-c.ToolsChanged():
	default:
		t.Fatal("the owner was not told to re-list")
	}
	closeHTTP(t, c)
}

// TestStreamableReadResourceNamed: a 2026-07-28 resources/read carries
// Mcp-Name with its params.uri, which the revision's standard headers
// require of it as of tools/call and prompts/get (a server rejects a
// request without it, -32020).
func TestStreamableReadResourceNamed(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	face, url := httpServer(t, mcptest.Scenario{Era: mcptest.EraModernOnly}, mcptest.HTTPOptions{})
	c := dial(t, url, Remote{}, Config{})
	defer closeHTTP(t, c)
	if c.Era() != EraModern {
		t.Fatalf("era %v", c.Era())
	}
	const uri = "file:///mcptest/link.txt"
	if _, err := c.ReadResource(context.Background(), uri, CallOptions{}); err != nil {
		t.Fatalf("ReadResource: %v", err)
	}
	if got := face.LastHeaders("POST resources/read").Get("Mcp-Name"); got != uri {
		t.Fatalf("resources/read Mcp-Name = %q, want %q", got, uri)
	}
}

// mismatchServer is a 2026-07-28 server that refuses every tools/call
// -32020 HeaderMismatch and never answers tools/list (it holds the
// request until the client gives up), signalling listed at the first
// tools/list. It returns the URL of its /mcp.
func mismatchServer(t *testing.T) (string, <-chan struct{}) {
	face := mcptest.NewHTTP(mcptest.Scenario{Era: mcptest.EraModernOnly}, mcptest.HTTPOptions{})
	listed := make(chan struct{}, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		switch m.Method {
		case "tools/call":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32020,"message":"Header mismatch: Mcp-Param-Region missing"}}`, m.ID)
			return
		case "tools/list":
			select {
			case listed <- struct{}{}:
			default:
			}
			<-r.Context().Done()
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		face.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { ts.Close(); face.Close() })
	return ts.URL + "/mcp", listed
}

// TestStreamableHeaderRetryDeadline: the re-listing after a -32020 and
// the call sent again are the same call, held to its MaxTimeout: a
// server that refuses the call's headers and then never answers
// tools/list does not keep the caller for the client's own (here hour
// long) per-request timeouts.
func TestStreamableHeaderRetryDeadline(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	url, listed := mismatchServer(t)
	c := dial(t, url, Remote{}, Config{CallIdleTimeout: time.Hour, CallMaxTimeout: time.Hour})
	defer closeHTTP(t, c)
	if c.Era() != EraModern {
		t.Fatalf("era %v", c.Era())
	}
	const hard = 200 * time.Millisecond
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(context.Background(), "echo", JSONArgs([]byte(`{"text":"x"}`)), CallOptions{MaxTimeout: hard})
		done <- err
	}()
	select {
	case err := <-done:
		if !isHeaderMismatch(err) {
			t.Fatalf("CallTool: %v, want the server's -32020", err)
		}
	case <-time.After(waitFor): // a backstop: the call ends 200 ms in
		t.Fatal("the call outlived its MaxTimeout, waiting on the re-listing")
	}
	select {
	case <-listed:
	default:
		t.Fatal("the tools were not listed again")
	}
}

// FuzzSafeInteger holds safeInteger to math/big's exact reading of the
// same number, where that is cheap (short numbers, small exponents).
func FuzzSafeInteger(f *testing.F) {
	for _, s := range []string{"42", "42.0", "4.2e1", "-0.0001e4", "9007199254740991", "9007199254740992", "1.5", "0e5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var v json.Number
		if len(s) > 40 || json.Unmarshal([]byte(s), &v) != nil || string(v) != s {
			return
		}
		if i := strings.IndexAny(s, "eE"); i >= 0 && len(strings.TrimLeft(s[i+1:], "+-")) > 3 {
			return
		}
		n, ok := safeInteger([]byte(s))
		r, exact := new(big.Rat).SetString(s)
		if !exact {
			t.Fatalf("big cannot read %q", s)
		}
		limit := big.NewRat(1<<53-1, 1)
		want := r.IsInt() && r.Cmp(limit) <= 0 && r.Cmp(new(big.Rat).Neg(limit)) >= 0
		if ok != want || (ok && big.NewRat(n, 1).Cmp(r) != 0) {
			t.Fatalf("safeInteger(%s) = %d, %v; big says %v, %v", s, n, ok, r, want)
		}
	})
}

// TestStreamableHeaderRetryShared: a call refused -32020 while another
// call's re-listing is under way waits for it no longer than its own
// deadline, though it shares that re-listing rather than starting one.
func TestStreamableHeaderRetryShared(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	url, listed := mismatchServer(t)
	c := dial(t, url, Remote{}, Config{CallIdleTimeout: time.Hour, CallMaxTimeout: time.Hour})
	if c.Era() != EraModern {
		t.Fatalf("era %v", c.Era())
	}
	first := make(chan error, 1)
	go func() {
		_, err := c.CallTool(context.Background(), "echo", JSONArgs([]byte(`{"text":"a"}`)), CallOptions{MaxTimeout: time.Hour})
		first <- err
	}()
	<-listed // the first call's re-listing holds the slot, stalled
	second := make(chan error, 1)
	go func() {
		_, err := c.CallTool(context.Background(), "echo", JSONArgs([]byte(`{"text":"b"}`)), CallOptions{MaxTimeout: 200 * time.Millisecond})
		second <- err
	}()
	select {
	case err := <-second:
		if !isHeaderMismatch(err) {
			t.Errorf("the second call: %v, want the server's -32020", err)
		}
	case <-time.After(waitFor): // a backstop: it ends 200 ms in
		t.Error("the second call waited on the first's re-listing past its own deadline")
		closeHTTP(t, c)
		<-first
		<-second
		return
	}
	closeHTTP(t, c) // ends the first call's re-listing
	<-first
}

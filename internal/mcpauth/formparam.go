package mcpauth

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
)

// maxTokenForm bounds a token request's form read back to add a
// parameter: one is a few hundred bytes.
const maxTokenForm = 64 << 10

// withFormParam returns a client like hc whose form POSTs carry
// name=value when they do not already. It exists for the refresh grant:
// RFC 8707 §2.2 has a refresh request name its resource too, as the MCP
// authorization spec requires of every token request, and x/oauth2
// gives its refresh request no parameters of the caller's. The client
// is made for one token request; every form it posts gets the parameter.
func withFormParam(hc *http.Client, name, value string) *http.Client {
	c := *hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = &formParam{base: base, name: name, value: value}
	return &c
}

type formParam struct {
	base        http.RoundTripper
	name, value string
}

func (f *formParam) RoundTrip(req *http.Request) (*http.Response, error) {
	mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if req.Method != http.MethodPost || req.Body == nil || mt != "application/x-www-form-urlencoded" {
		return f.base.RoundTrip(req)
	}
	b, err := io.ReadAll(io.LimitReader(req.Body, maxTokenForm+1))
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	if len(b) > maxTokenForm {
		return nil, errors.New("mcpauth: a token request's form is larger than 64 KiB")
	}
	form, err := url.ParseQuery(string(b))
	if err != nil {
		return nil, err
	}
	if !form.Has(f.name) {
		form.Set(f.name, f.value)
	}
	enc := form.Encode()
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(strings.NewReader(enc))
	r.ContentLength = int64(len(enc))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(enc)), nil }
	return f.base.RoundTrip(r)
}

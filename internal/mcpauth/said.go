package mcpauth

import (
	"cmp"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"github.com/capbridge/capbridge/internal/httpcred"
	"github.com/capbridge/capbridge/internal/truncate"
)

// maxSaid bounds what an error quotes of what a server said: an
// authorization server's error and its description.
const maxSaid = 300

// minCredential is the shortest value taken out of what a server said:
// a shorter one would garble the text and hide nothing worth hiding.
const minCredential = 4

// credential is a value a request carried, by the name it went under.
type credential struct{ name, value string }

// formProtocol are the parameters of token and revocation requests that
// carry no secret; every other parameter of such a form is taken for
// one, so a grant added later is covered without being listed.
var formProtocol = map[string]bool{
	"grant_type": true, "client_id": true, "scope": true, "resource": true, "redirect_uri": true, "audience": true,
	"requested_token_type": true, "subject_token_type": true, "actor_token_type": true, "client_assertion_type": true,
	"token_type_hint": true,
}

// said renders text a server sent back to req (an error description)
// for an error: every credential req carried, and those named, is
// replaced by "[redacted:NAME]" (an authorization server that quotes a
// revoked refresh token or a wrong secret in its answer must not put it
// into the errors that status, logs and a program's denial repeat),
// control and bidirectional-override characters by spaces, and the whole
// is bounded. The
// credentials are taken out before the text is cut, so no part of one
// survives the cut.
func said(text string, req *http.Request, named ...credential) string {
	creds := append(sentCredentials(req), named...)
	// The longest first: a credential that holds another is replaced
	// whole.
	slices.SortStableFunc(creds, func(a, b credential) int { return cmp.Compare(len(b.value), len(a.value)) })
	for _, c := range creds {
		if len(c.value) < minCredential {
			continue
		}
		marker := "[redacted:" + c.name + "]"
		text = strings.ReplaceAll(text, c.value, marker)
		// As the form sent it: a server may quote the body it read.
		if e := url.QueryEscape(c.value); e != c.value {
			text = strings.ReplaceAll(text, e, marker)
		}
	}
	text = strings.Map(func(r rune) rune {
		// C0 and C1 controls (a terminal acts on both: U+009B is CSI)
		// and the bidirectional overrides that make text read otherwise.
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return ' '
		}
		return r
	}, text)
	return truncate.Ellipsis(text, maxSaid)
}

// sentCredentials are the credentials req carried: its Authorization
// in each of httpcred.Parts' forms, and its form's parameters but formProtocol's, read
// again through GetBody (what net/http resends a body with). Values are
// as sent and, where they were escaped, as their sender knew them.
func sentCredentials(req *http.Request) []credential {
	if req == nil {
		return nil
	}
	var out []credential
	for _, p := range httpcred.Parts(req.Header.Get("Authorization")) {
		out = append(out, credential{strings.TrimSpace("Authorization " + p.What), p.Value})
	}
	mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if req.GetBody == nil || mt != "application/x-www-form-urlencoded" {
		return out
	}
	body, err := req.GetBody()
	if err != nil {
		return out
	}
	b, err := io.ReadAll(io.LimitReader(body, maxTokenForm+1))
	_ = body.Close()
	if err != nil || len(b) > maxTokenForm {
		return out
	}
	form, _ := url.ParseQuery(string(b)) // what parses, if not all does
	for name, vs := range form {
		if formProtocol[name] {
			continue
		}
		for _, v := range vs {
			out = append(out, credential{name, v})
		}
	}
	return out
}

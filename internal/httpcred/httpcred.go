// Package httpcred names the forms in which a credential an HTTP
// request carried can come back in what a server says.
package httpcred

import (
	"encoding/base64"
	"net/url"
	"strings"
)

// Part is one form of a credential: What is "" for the header value or
// its token, "password" or "user" for what a Basic credential encodes.
type Part struct {
	What  string
	Value string
}

// Parts returns the forms of the credential in header value v that a
// server may quote back: v whole; its token, what follows the auth
// scheme; and for Basic the password (the user when there is none), as
// encoded and as its sender knew it before form-escaping it (x/oauth2
// form-escapes a client's id and secret before encoding them, RFC 6749
// §2.3.1). Empty forms are left out; callers skip values too short to
// take out of text.
func Parts(v string) []Part {
	if v == "" {
		return nil
	}
	parts := []Part{{Value: v}}
	scheme, token, ok := strings.Cut(v, " ")
	if !ok {
		return parts
	}
	token = strings.TrimSpace(token)
	if token != "" {
		parts = append(parts, Part{Value: token})
	}
	if !strings.EqualFold(scheme, "Basic") {
		return parts
	}
	b, err := base64.StdEncoding.DecodeString(token)
	if err != nil {
		return parts
	}
	user, pass, _ := strings.Cut(string(b), ":")
	what, secret := "password", pass
	if pass == "" {
		what, secret = "user", user
	}
	if secret == "" {
		return parts
	}
	parts = append(parts, Part{what, secret})
	if u, err := url.QueryUnescape(secret); err == nil && u != secret {
		parts = append(parts, Part{what, u})
	}
	return parts
}

// Package weborigin computes the origin of an http or https URL, the
// unit of trust that redirects, endpoints and metadata are compared by.
package weborigin

import (
	"net/url"
	"strings"
)

// Of returns u's origin as a string two URLs of the same origin share:
// its scheme, its host in lower case and its port, the scheme's default
// when u names none (RFC 6454, 4: scheme and host are compared without
// regard to case, and a URL without a port has its scheme's). u's
// scheme is lower case already: url.Parse makes it so.
func Of(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return u.Scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

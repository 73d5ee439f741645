package redact

import "regexp"

// shape is a kind of credential recognised by its look rather than its
// value: what a server prints of a token capbridge never saw (one it read
// from its own files, or from an inherited variable capbridge did not
// name) still must not reach a caller.
type shape struct {
	name string
	re   *regexp.Regexp
	// keep keeps the first submatch ("Bearer ", a URL's scheme,
	// "password="): the marker replaces the rest.
	keep bool
}

// shapes are the credential shapes Text and Tail redact, each
// "[redacted:NAME]". Each is specific enough that ordinary text does not
// match it; the generic key=value one needs a name that says secret.
var shapes = []shape{
	{name: "private-key", re: regexp.MustCompile(`-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)`)},
	{name: "authorization", re: regexp.MustCompile(`(?i)(\b(?:bearer|basic|token)\s+)[A-Za-z0-9._~+/=-]{8,}`), keep: true},
	{name: "url-userinfo", re: regexp.MustCompile(`(?i)(\b[a-z][a-z0-9+.-]*://)[^\s/?#@]+@`), keep: true},
	{name: "github", re: regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})`)},
	{name: "api-key", re: regexp.MustCompile(`\b(?:sk-[A-Za-z0-9_-]{16,}|[rs]k_(?:live|test)_[A-Za-z0-9]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|glpat-[A-Za-z0-9_-]{20,}|AIza[0-9A-Za-z_-]{35})`)},
	{name: "aws", re: regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b`)},
	{name: "jwt", re: regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`)},
	{name: "secret", re: regexp.MustCompile(`(?i)(\b[a-z0-9_.-]*(?:password|passwd|secret|token|api_?key|access_?key|credential)s?["']?\s*[:=]\s*["']?)[^\s"',;&\[][^\s"',;&]{5,}`), keep: true},
}

// cutShape matches, at the very end of a tail, a credential's start that
// a server dying mid-write cut short of what a shape needs: its prefix
// is enough to redact what follows it.
var cutShape = regexp.MustCompile(`(?i)(?:\bbearer\s+|\b(?:gh[pousr]_|github_pat_|sk-|[rs]k_live_|xox[abposr]-|glpat-|AKIA|ASIA|AIza|eyJ))\S*$`)

// redactShapes replaces every credential shape in s.
func redactShapes(s string) string {
	for _, sh := range shapes {
		marker := "[redacted:" + sh.name + "]"
		if sh.keep {
			s = sh.re.ReplaceAllString(s, "${1}"+marker)
		} else {
			s = sh.re.ReplaceAllLiteralString(s, marker)
		}
	}
	return s
}

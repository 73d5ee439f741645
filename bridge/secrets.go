package bridge

import (
	"fmt"
	"io"
	"maps"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/capbridge/capbridge/bridge/config"
	"github.com/capbridge/capbridge/bridge/internal/redact"
)

// SecretWriter writes what it is given to a writer with every secret the
// configuration resolved (config.ResolveSecrets: ${file:…}, ${cmd:…},
// ${env:…} in env and header values) replaced by "[redacted:WHERE]", raw
// or JSON-escaped. serve puts one under its logs, its audit trail and its
// terminal, so that a server that prints its environment, or an error
// that quotes a header, never writes a secret where capbridge writes.
// Each Write must hold whole values, as a log line does. Set gives it a
// reloaded configuration's secrets (Options.Secrets).
type SecretWriter struct{ *redact.Writer }

// NewSecretWriter returns a SecretWriter to w of cfg's secrets.
func NewSecretWriter(w io.Writer, cfg *config.Config) *SecretWriter {
	return NewSecretWriterOf(w, Secrets(cfg))
}

// NewSecretWriterOf returns a SecretWriter to w of secrets, as Secrets
// returns them.
func NewSecretWriterOf(w io.Writer, secrets map[string]string) *SecretWriter {
	return &SecretWriter{redact.NewWriter(w, secrets)}
}

// Secrets are the values cfg's secret references resolved to, by where
// they came from ("github env.TOKEN"), each at least 4 bytes long.
func Secrets(cfg *config.Config) map[string]string {
	out := map[string]string{}
	for _, s := range cfg.Servers {
		addSecrets(out, s)
	}
	return out
}

// pathKeys are the segments of u's path that look like a key, by their
// place: some hosted servers hand out URLs with the key in the path
// (https://host/mcp/KEY/sse), so a segment long enough to be one, of
// letters and digits both, is taken as one.
func pathKeys(u *url.URL) map[string]string {
	keys := map[string]string{}
	for i, seg := range strings.Split(u.Path, "/") {
		if len(seg) >= 16 && strings.ContainsAny(seg, "0123456789") && strings.IndexFunc(seg, unicode.IsLetter) >= 0 {
			keys["url path "+strconv.Itoa(i)] = seg
		}
	}
	return keys
}

// addSecrets adds s's secrets to into, each under its name, or, where
// into holds another value under that name (a secret a reload rotated,
// whose earlier value a draining server still holds), under the name
// marked as an earlier one: no value is ever dropped for another.
func addSecrets(into map[string]string, s config.Server) {
	secrets := s.SecretValues()
	if s.Remote != nil {
		// A key written in the URL itself is no reference, but a log
		// line quoting the URL must not show it either.
		if u, err := url.Parse(s.Remote.URL); err == nil {
			keys := pathKeys(u)
			maps.Copy(keys, secrets)
			secrets = keys
		}
	}
	for where, v := range secrets {
		name := s.Name + " " + where
		for n := 1; ; n++ {
			if cur, ok := into[name]; !ok || cur == v {
				into[name] = v
				break
			}
			name = fmt.Sprintf("%s %s (earlier %d)", s.Name, where, n)
		}
	}
}

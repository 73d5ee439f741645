package bridge

import (
	"fmt"
	"io"

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

// addSecrets adds s's secrets to into, each under its name, or, where
// into holds another value under that name (a secret a reload rotated,
// whose earlier value a draining server still holds), under the name
// marked as an earlier one: no value is ever dropped for another.
func addSecrets(into map[string]string, s config.Server) {
	for where, v := range s.SecretValues() {
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

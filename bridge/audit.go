package bridge

import "github.com/capbridge/capbridge/internal/truncate"

// maxAuditString bounds each string a client or a server chose (a
// server or tool name a call named, a tool name a listing gave) where the
// audit trail and the logs repeat it, as the metrics labels are bounded:
// a program that names a tool of 16 MiB writes 128 bytes of it, not 16
// MiB a line.
const maxAuditString = 128

// clip renders such a string for the audit trail and the logs: valid
// UTF-8, at most maxAuditString bytes and a "…" where it was cut.
func clip(s string) string { return truncate.Ellipsis(s, maxAuditString) }

// clipAll is clip of each.
func clipAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = clip(s)
	}
	return out
}

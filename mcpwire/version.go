package mcpwire

import "github.com/capbridge/capbridge/internal/mcpproto"

// requestedVersion is the protocol revision the client asks for.
const requestedVersion = "2025-11-25"

// modernVersion is the stateless revision, reachable only through
// server/discover: an initialize answer naming it is refused, since
// a server that negotiated it through initialize is not speaking it.
const modernVersion = mcpproto.ModernVersion

// supportedVersions are the legacy revisions the client accepts from a server,
// newest first. Anything else is refused with a *VersionError.
var supportedVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// batchVersion is the only revision whose stdio transport allows a
// JSON-RPC batch on one line ("MUST support receiving JSON-RPC
// batches"); 2025-06-18 removed batching again.
const batchVersion = "2025-03-26"

func versionSupported(v string) bool {
	for _, s := range supportedVersions {
		if s == v {
			return true
		}
	}
	return false
}

package bridge

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/capbridge/capbridge/bridge/internal/auditlog"
	"github.com/capbridge/capbridge/bridge/internal/fairshare"
	"github.com/capbridge/capbridge/internal/testkit/rawecho"
)

// BenchmarkBridgeAudited is BenchmarkBridgeCall's bridge against rawecho
// with the audit trail on, as capbridge serve runs it: one JSON line per
// call, batched, into a file. Its difference from BenchmarkBridgeCall's
// rawecho/bridge cells is what the audit trail costs.
func BenchmarkBridgeAudited(b *testing.B) {
	argv, env := rawecho.Command()
	for _, par := range []int{1, 32} {
		b.Run(fmt.Sprintf("inflight=%d", par), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "audit.log"))
			if err != nil {
				b.Fatal(err)
			}
			// Registered first, so it runs after the bridge's Shutdown.
			b.Cleanup(func() { f.Close() })
			br, token := benchBridge(b, argv, env)
			auditTo(br, f)
			benchEcho(b, br, token, par, nil)
		})
	}
}

// auditTo sends br's audit trail to w as New does given AuditWriter. It
// is called before any connection exists.
func auditTo(br *Bridge, w *os.File) {
	br.auditOut = auditlog.NewBatch(w, auditlog.BatchBytes, auditlog.BatchDelay)
	br.audit = zerolog.New(br.auditOut).With().Timestamp().Str("log", "audit").Logger()
}

// BenchmarkBridgeMaxInflight measures 32 calls in flight on one
// connection, audited as above, with the server's max_inflight at
// several values: the calls beyond it wait in admission's queue. It is
// the measurement behind config.DefaultMaxInflight.
func BenchmarkBridgeMaxInflight(b *testing.B) {
	argv, env := rawecho.Command()
	for _, n := range []int{4, 8, 16, 32} {
		b.Run(fmt.Sprintf("max_inflight=%d", n), func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "audit.log"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { f.Close() })
			br, token := benchBridge(b, argv, env)
			auditTo(br, f)
			// Before any call: admission reads cfg and adm only then.
			s := br.srv("t")
			// One grant drives it: its share is the whole server.
			s.cfg().MaxInflight, s.adm = n, fairshare.New[*Grant](fairshare.Limits{Max: n, PerKey: n, MaxQueue: s.cfg().MaxQueue, QueuePerKey: s.cfg().MaxQueue})
			benchEcho(b, br, token, 32, nil)
		})
	}
}

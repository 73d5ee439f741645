package bridge

import (
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capbridge/capbridge/bridge/internal/capserver"
	"github.com/capbridge/capbridge/capwire"
)

// Connection admission on the call socket. Any local process that can
// connect() reaches the socket, so admission keeps two budgets apart:
//
//   - strangers, connections that have not yet said hello:
//     max_unauth_connections in all and max_unauth_per_uid per peer uid,
//     each with hello_timeout to say it. A full budget drops one of its
//     connections (the peer uid's own, when that uid's share is full; else
//     one of the uid holding the most): the oldest that has sent nothing
//     yet, else the oldest. So a flood keeps recycling its own
//     connections, and a program whose hello is already waiting to be
//     read is not dropped for a silent one.
//   - authenticated connections: max_connections in all,
//     max_conns_per_grant per grant and max_conns_per_uid per peer uid; a
//     hello beyond them is refused bad_token, and a connection with no
//     call in flight for idle_timeout is closed.
//
// A peer outside allowed_uids is refused when accepted, before it costs
// either budget.

// stranger is one call-socket connection from accept to its end; until
// authenticate moves it, it is in the strangers' budget. Its fields are
// guarded by the Bridge's mu.
type stranger struct {
	c       net.Conn
	uid     uint32
	seq     uint64 // order of admission: lower is older
	evicted bool   // dropped for a newer connection
	grant   string // "" until authenticated
}

// callConns is the call socket's connection accounting, guarded by the
// Bridge's mu.
type callConns struct {
	seq      uint64
	pending  map[uint32][]*stranger // strangers by peer uid, oldest first
	nPending int
	auth     int
	byGrant  map[string]int
	byUID    map[uint32]int
}

func newCallConns() callConns {
	return callConns{pending: map[uint32][]*stranger{}, byGrant: map[string]int{}, byUID: map[uint32]int{}}
}

// Refusals, for the summary logged once per refusalLogInterval.
var (
	errEvicted   = errors.New("bridge: dropped for a newer connection while waiting for its hello")
	errConnsFull = errors.New("bridge: max_connections authenticated connections are open")
	errGrantFull = errors.New("bridge: the grant has max_conns_per_grant connections open")
	errUIDFull   = errors.New("bridge: the peer uid has max_conns_per_uid connections open")
)

// uidAllowed is allowed_uids' rule: an empty list allows every uid.
func uidAllowed(allowed []uint32, uid uint32) bool {
	return len(allowed) == 0 || slices.Contains(allowed, uid)
}

// trackStranger admits a new call-socket connection from uid to the
// strangers' budget, dropping the oldest stranger it displaces, or
// reports nil once the bridge is closing.
func (b *Bridge) trackStranger(c net.Conn, uid uint32) *stranger {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return nil
	}
	cc := &b.calls
	if len(cc.pending[uid]) >= b.cfg.Bridge.MaxUnauthPerUID {
		b.evictLocked(uid)
	} else if cc.nPending >= b.cfg.Bridge.MaxUnauthConnections {
		// The uid holding the most strangers pays, oldest first: a
		// flooding uid displaces its own connections, not others'.
		var worst uint32
		most := -1
		for u, l := range cc.pending {
			if len(l) > most || len(l) == most && l[0].seq < cc.pending[worst][0].seq {
				worst, most = u, len(l)
			}
		}
		b.evictLocked(worst)
	}
	cc.seq++
	s := &stranger{c: c, uid: uid, seq: cc.seq}
	cc.pending[uid] = append(cc.pending[uid], s)
	cc.nPending++
	b.open[c] = struct{}{}
	return s
}

// evictLocked drops one of uid's strangers, the oldest that has sent
// nothing, else the oldest: it is closed, so its read of the hello fails
// and its goroutine ends. The caller holds mu.
func (b *Bridge) evictLocked(uid uint32) {
	l := b.calls.pending[uid]
	s := l[0]
	for _, x := range l {
		if silent(x.c) {
			s = x
			break
		}
	}
	b.dropPending(s)
	s.evicted = true
	_ = s.c.Close()
	b.refusals.evicted.Add(1)
	b.metrics.connRefused(false, "evicted")
}

// silent reports whether nothing the peer sent is waiting to be read
// (the FIONREAD ioctl). A connection whose hello is queued is about to be served;
// one that has said nothing is the flood's.
func silent(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	n := 0
	if err := raw.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), ioctlFIONREAD) }); err != nil {
		return true
	}
	return err != nil || n == 0
}

// dropPending removes s from the strangers. The caller holds mu.
func (b *Bridge) dropPending(s *stranger) {
	cc := &b.calls
	l := cc.pending[s.uid]
	if i := slices.Index(l, s); i >= 0 {
		l = slices.Delete(l, i, i+1)
		cc.nPending--
	}
	if len(l) == 0 {
		delete(cc.pending, s.uid)
	} else {
		cc.pending[s.uid] = l
	}
}

// authenticate moves s, whose hello named grant, from the strangers to
// the authenticated connections, or says which budget refuses it.
func (b *Bridge) authenticate(s *stranger, grant string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	cc := &b.calls
	var err error
	switch {
	case s.evicted:
		return errEvicted
	case cc.auth >= b.cfg.Bridge.MaxConnections:
		err = errConnsFull
	case cc.byGrant[grant] >= b.cfg.Bridge.MaxConnsPerGrant:
		err = errGrantFull
	case cc.byUID[s.uid] >= b.cfg.Bridge.MaxConnsPerUID:
		err = errUIDFull
	}
	if err != nil {
		b.refusals.full.Add(1)
		return err
	}
	b.dropPending(s)
	s.grant = grant
	cc.auth++
	cc.byGrant[grant]++
	cc.byUID[s.uid]++
	return nil
}

// untrackCall forgets a call-socket connection that has ended.
func (b *Bridge) untrackCall(s *stranger) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.open, s.c)
	cc := &b.calls
	if s.grant == "" {
		b.dropPending(s)
	} else {
		cc.auth--
		if cc.byGrant[s.grant]--; cc.byGrant[s.grant] == 0 {
			delete(cc.byGrant, s.grant)
		}
		if cc.byUID[s.uid]--; cc.byUID[s.uid] == 0 {
			delete(cc.byUID, s.uid)
		}
	}
	b.signalConnsIdle()
}

// maxLingering bounds the refused connections held open while their
// fatal frame is read; beyond it a refused connection is closed at once.
const maxLingering = 16

// lingerFor is how long a refused connection is held for its peer to
// read why: its hello is read and dropped meanwhile, so the peer's write
// of it does not fail before it can read the fatal frame.
const lingerFor = time.Second

// refuseAtAccept tells a peer refused at accept why, in a fatal frame,
// without letting it hold a connection: at most maxLingering such peers
// are held, each for at most lingerFor.
func (b *Bridge) refuseAtAccept(c net.Conn, code, msg string) {
	if b.lingering.Add(1) > maxLingering {
		b.lingering.Add(-1)
		_ = c.Close()
		return
	}
	b.lingerWG.Go(func() {
		defer b.lingering.Add(-1)
		defer c.Close()
		f, err := capwire.AppendFrame(nil, &capwire.FatalMsg{Code: code, Message: msg}, 0)
		if err != nil {
			return
		}
		_ = c.SetDeadline(time.Now().Add(lingerFor))
		if _, err := c.Write(f); err != nil {
			return
		}
		if uc, ok := c.(*net.UnixConn); ok {
			_ = uc.CloseWrite()
		}
		var sink [512]byte
		for n := 0; n < capserver.MaxHello; {
			k, err := c.Read(sink[:])
			if err != nil {
				return
			}
			n += k
		}
	})
}

// refusals counts what admission refused; the reporter logs the counts
// once per refusalLogInterval, so a flood costs one log line per
// interval, not one per connection.
type refusals struct {
	uid     atomic.Int64 // peers outside allowed_uids
	cred    atomic.Int64 // peers whose credentials could not be read
	evicted atomic.Int64 // strangers dropped for newer connections
	hello   atomic.Int64 // hellos that failed: timeout, bad frame, bad token
	full    atomic.Int64 // hellos refused for a full authenticated budget
	idle    atomic.Int64 // authenticated connections closed for idleness
}

// refusalLogInterval is how often the refusal summary is logged (only
// when something was refused).
const refusalLogInterval = 10 * time.Second

// reportRefusals logs the refusals of each interval until stop is
// closed, then the last ones.
func (b *Bridge) reportRefusals(stop <-chan struct{}, done *sync.WaitGroup) {
	defer done.Done()
	t := time.NewTicker(refusalLogInterval)
	defer t.Stop()
	var last [7]int64
	for {
		select {
		case <-t.C:
		case <-stop:
			b.logRefusals(&last)
			return
		}
		b.logRefusals(&last)
	}
}

func (b *Bridge) logRefusals(last *[7]int64) {
	r := &b.refusals
	now := [7]int64{r.uid.Load(), r.cred.Load(), r.evicted.Load(), r.hello.Load(), r.full.Load(), r.idle.Load(), b.partial.Refused()}
	if now == *last {
		return
	}
	d := func(i int) int64 { return now[i] - last[i] }
	b.log.Warn().Int64("uid_not_allowed", d(0)).Int64("no_credentials", d(1)).Int64("dropped_for_newer", d(2)).
		Int64("hello_failed", d(3)).Int64("connections_full", d(4)).Int64("idle_closed", d(5)).Int64("partial_frames_refused", d(6)).
		Dur("interval", refusalLogInterval).Msg("call socket refusals")
	*last = now
}

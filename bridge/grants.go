package bridge

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capbridge/capbridge/bridge/internal/quota"
)

// Grant errors. The call path translates them into capwire codes.
var (
	ErrBadToken     = errors.New("bridge: unknown or malformed grant token")
	ErrGrantExpired = errors.New("bridge: grant expired")
	ErrRevoked      = errors.New("bridge: grant revoked")
	ErrTooManyGrant = errors.New("bridge: too many live grants")
	// ErrBadTTL: a grant's lifetime is not within [MinGrantTTL,
	// MaxGrantTTL]. A TTL is never rounded or defaulted into range: a
	// caller that computed 0 or a negative duration by mistake must
	// learn of it, not receive a ten-minute grant.
	ErrBadTTL = errors.New("bridge: grant ttl out of range")
	// ErrBadQuota: a grant's quota is out of range, or names a server
	// the grant does not reach.
	ErrBadQuota = errors.New("bridge: bad grant quota")
)

// Grant bounds. A grant lives for one code-mode execution, so minutes are
// normal and a day is already generous; under a second is a unit mistake
// (a TTL meant in seconds read as milliseconds), not a real use.
const (
	DefaultGrantTTL = 10 * time.Minute
	MinGrantTTL     = time.Second
	MaxGrantTTL     = 24 * time.Hour
	maxLiveGrants   = 1 << 16
)

// A token is "cbt1." + 16 hex characters of grant id + "." + 22 base64url
// characters of secret. The id is public (it appears in the audit trail and
// names the grant in revoke); the 128-bit secret is the authority, and is
// compared in constant time.
const tokenPrefix = "cbt1."

// tokenEncoding is strict so that each secret has exactly one spelling.
var tokenEncoding = base64.RawURLEncoding.Strict()

// GrantSpec is what the harness asks for.
type GrantSpec struct {
	// Servers maps each server the execution may reach to the tools it may
	// call there; a nil or empty list means every tool the server offers.
	Servers map[string][]string
	// TTL is how long the grant lives, within [MinGrantTTL, MaxGrantTTL];
	// the zero value (left unset) means DefaultGrantTTL, and any other
	// value out of range is ErrBadTTL.
	TTL     time.Duration
	PeerUID *uint32 // when set, only a peer with this uid may use it
	// AllowDestructive lets the grant call the tools the operator
	// declared destructive without naming each one.
	AllowDestructive bool
	// Run, when set, makes this the grant of one program run: every call
	// it makes carries the run's id in the audit trail, and revoking it
	// with the run's end writes the run's own audit line.
	Run *RunInfo
	// Resources are the servers among Servers whose resources the grant
	// may read (resources/read, through the capbridge capability).
	Resources []string
	// Quotas are the harness's quotas by scope ("" the grant, "server",
	// "server/tool"), set over the operator's defaults quota by quota
	// (config.Config.GrantQuotas).
	Quotas map[quota.Scope]quota.Limits

	// seen is each server's table when the grant is issued (Bridge.Grant
	// fills it): the surface the program was given, which a call is held
	// to (sameSurface).
	seen map[string]*table
}

// Grant is one issued authority. Its fields are immutable after issue;
// revocation is signalled through Context.
type Grant struct {
	ID      string
	Expires time.Time
	PeerUID *uint32
	servers map[string]map[string]bool // server → allowed tools (nil: all)
	seen    map[string]*table          // server → its table at issue (nil: none yet)
	secret  [16]byte
	// allowDestructive is GrantSpec.AllowDestructive.
	allowDestructive bool
	// run is GrantSpec.Run; nil for a grant that is not a run's.
	run *RunInfo
	// usage counts the calls made under the grant, for the harness's
	// accounting (Usage).
	usage grantUsage
	// resources is GrantSpec.Resources, as a set.
	resources map[string]bool
	// quota meters the grant's calls against its quotas; nil when it has
	// none, and its calls pay nothing for them.
	quota *quota.Set

	ctx    context.Context // cancelled, with the reason as cause, on revoke or expiry
	cancel context.CancelCauseFunc
	timer  *time.Timer

	// The grant's audit budget (audit.go): bytes left, lines dropped once
	// it was spent, and whether that was announced.
	auditLeft    atomic.Int64
	auditDropped atomic.Int64
	auditSpent   atomic.Bool
}

// RunInfo names the program run a grant was issued for.
type RunInfo struct {
	ID         string // the run's id, chosen by whoever runs it
	Language   string // the program's language
	CodeSHA256 string // the SHA-256 of its source, hex
	Servers    []string
}

// Usage is what was done under a grant: calls retired (denied ones
// included), denials among them, the argument and result bytes, and the
// calls' time in capbridge, summed.
type Usage struct {
	Calls, Denied, ArgBytes, ResultBytes int64
	Took                                 time.Duration
}

// grantUsage is a grant's accounting. A call counts from its admission
// on the grant's connection (begin) until its audit line has counted it
// (end), so that a revoke can wait for the calls still running under the
// grant (settled) and report them too, not only those that finished
// before it came.
//
// Concurrency: every method may be called from any goroutine. The call
// path touches two atomics; mu and idle are for a waiting revoke alone.
type grantUsage struct {
	calls, denied, argBytes, resultBytes, took atomic.Int64

	running atomic.Int64
	waiters atomic.Int32
	mu      sync.Mutex
	idle    chan struct{} // closed when running reaches zero while a revoke waits
}

// begin counts a call admitted under the grant.
func (u *grantUsage) begin() { u.running.Add(1) }

// end uncounts a call once its usage is counted.
func (u *grantUsage) end() {
	if u.running.Add(-1) == 0 && u.waiters.Load() > 0 {
		u.mu.Lock()
		if u.idle != nil {
			close(u.idle)
			u.idle = nil
		}
		u.mu.Unlock()
	}
}

// settled waits until no call runs under the grant, or ctx is done.
func (u *grantUsage) settled(ctx context.Context) {
	u.waiters.Add(1)
	defer u.waiters.Add(-1)
	u.mu.Lock()
	if u.running.Load() == 0 {
		u.mu.Unlock()
		return
	}
	if u.idle == nil {
		u.idle = make(chan struct{})
	}
	idle := u.idle
	u.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// Usage reports what was done under the grant so far.
func (g *Grant) Usage() Usage {
	return Usage{Calls: g.usage.calls.Load(), Denied: g.usage.denied.Load(),
		ArgBytes: g.usage.argBytes.Load(), ResultBytes: g.usage.resultBytes.Load(), Took: time.Duration(g.usage.took.Load())}
}

// Quotas reports the grant's quotas and what its calls have used of
// them at now, the grant's own first; nil without quotas.
func (g *Grant) Quotas(now time.Time) []quota.Usage { return g.quota.Usage(now) }

// Run is the run the grant was issued for, or nil.
func (g *Grant) Run() *RunInfo { return g.run }

// Context is done when the grant is revoked or expires; context.Cause
// says which (ErrRevoked or ErrGrantExpired). Connections and calls made
// under the grant derive from it, so ending the grant ends them.
func (g *Grant) Context() context.Context { return g.ctx }

// Servers lists the servers the grant reaches, sorted.
func (g *Grant) Servers() []string { return slices.Sorted(maps.Keys(g.servers)) }

// Reaches reports whether the grant names server at all.
func (g *Grant) Reaches(server string) bool {
	_, ok := g.servers[server]
	return ok
}

// Allows reports whether the grant lets its holder call tool on server.
func (g *Grant) Allows(server, tool string) bool {
	tools, ok := g.servers[server]
	return ok && (tools == nil || tools[tool])
}

// names reports whether the grant names tool on server explicitly,
// rather than reaching it through "every tool".
func (g *Grant) names(server, tool string) bool {
	return g.servers[server][tool]
}

// ReadsResources reports whether the grant may read server's resources.
func (g *Grant) ReadsResources(server string) bool { return g.resources[server] }

// AllowsDestructive reports whether the grant may call destructive tools
// it does not name.
func (g *Grant) AllowsDestructive() bool { return g.allowDestructive }

// grantTable holds the live grants. It is safe for concurrent use.
type grantTable struct {
	mu   sync.Mutex
	byID map[string]*Grant
	now  func() time.Time
}

func newGrantTable() *grantTable {
	return &grantTable{byID: map[string]*Grant{}, now: time.Now}
}

// issue creates a grant under parent (the bridge's lifetime) and returns
// its token.
func (t *grantTable) issue(parent context.Context, spec GrantSpec) (*Grant, string, error) {
	ttl := spec.TTL
	if ttl == 0 {
		ttl = DefaultGrantTTL
	}
	if err := CheckTTL(ttl); err != nil {
		return nil, "", err
	}
	if len(spec.Servers) == 0 {
		return nil, "", errors.New("bridge: a grant must name at least one server")
	}
	for _, s := range spec.Resources {
		if _, ok := spec.Servers[s]; !ok {
			return nil, "", fmt.Errorf("bridge: a grant may read the resources only of servers it reaches, and it does not reach %q", s)
		}
	}
	for scope, l := range spec.Quotas {
		server, _, _ := strings.Cut(scope, "/")
		if _, ok := spec.Servers[server]; scope != "" && !ok {
			return nil, "", fmt.Errorf("%w: quota scope %q names server %q, which the grant does not reach", ErrBadQuota, scope, server)
		}
		if msg := l.Check(); msg != "" {
			return nil, "", fmt.Errorf("%w: quota scope %q: %s", ErrBadQuota, scope, msg)
		}
	}
	g := &Grant{Expires: t.now().Add(ttl), PeerUID: spec.PeerUID, servers: map[string]map[string]bool{}, seen: spec.seen, allowDestructive: spec.AllowDestructive, run: spec.Run,
		quota: quota.New(spec.Quotas, t.now())}
	for s, tools := range spec.Servers {
		if len(tools) == 0 {
			g.servers[s] = nil
			continue
		}
		set := make(map[string]bool, len(tools))
		for _, tool := range tools {
			set[tool] = true
		}
		g.servers[s] = set
	}
	for _, s := range spec.Resources {
		if g.resources == nil {
			g.resources = map[string]bool{}
		}
		g.resources[s] = true
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, "", fmt.Errorf("bridge: reading randomness: %v", err)
	}
	if _, err := rand.Read(g.secret[:]); err != nil {
		return nil, "", fmt.Errorf("bridge: reading randomness: %v", err)
	}
	g.ID = hex.EncodeToString(id[:])
	g.ctx, g.cancel = context.WithCancelCause(parent)

	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byID) >= maxLiveGrants {
		g.cancel(ErrTooManyGrant)
		return nil, "", ErrTooManyGrant
	}
	t.byID[g.ID] = g
	g.timer = time.AfterFunc(ttl, func() { t.end(g.ID, ErrGrantExpired) })
	return g, tokenPrefix + g.ID + "." + tokenEncoding.EncodeToString(g.secret[:]), nil
}

// CheckTTL refuses a grant lifetime outside [MinGrantTTL, MaxGrantTTL]
// with an error that matches ErrBadTTL and names the bounds.
func CheckTTL(ttl time.Duration) error {
	if ttl < MinGrantTTL || ttl > MaxGrantTTL {
		return fmt.Errorf("%w: %s is not within [%s, %s]", ErrBadTTL, ttl, MinGrantTTL, MaxGrantTTL)
	}
	return nil
}

// lookup returns the live grant a token names.
func (t *grantTable) lookup(token string) (*Grant, error) {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok {
		return nil, ErrBadToken
	}
	id, secretText, ok := strings.Cut(rest, ".")
	if !ok || len(secretText) != tokenEncoding.EncodedLen(16) {
		// Checked first: Decode writes past a too-small destination.
		return nil, ErrBadToken
	}
	var secret [16]byte
	if n, err := tokenEncoding.Decode(secret[:], []byte(secretText)); err != nil || n != len(secret) {
		return nil, ErrBadToken
	}
	t.mu.Lock()
	g := t.byID[id]
	t.mu.Unlock()
	// The id is not secret, so looking it up by map is fine; the secret is
	// compared in constant time, and against a dummy when the id is
	// unknown, so timing tells nothing about either.
	want := [16]byte{}
	if g != nil {
		want = g.secret
	}
	if subtle.ConstantTimeCompare(want[:], secret[:]) != 1 || g == nil {
		return nil, ErrBadToken
	}
	if err := context.Cause(g.ctx); err != nil {
		return nil, err
	}
	if !t.now().Before(g.Expires) {
		return nil, ErrGrantExpired
	}
	return g, nil
}

// grantIDOf returns the public grant id a token names, or "" when it is
// not shaped like a token. The secret part is never returned.
func grantIDOf(token string) string {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, ".")
	if !isGrantID(id) {
		return ""
	}
	return id
}

// isGrantID reports whether s has a grant id's shape: 16 hex digits.
func isGrantID(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && len(s) == 16
}

// live1 returns the live grant with id, or nil.
func (t *grantTable) live1(id string) *Grant {
	if id == "" {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

// revoke ends the grant named by id or token. It returns the grant it
// ended, or nil when no live grant was found.
func (t *grantTable) revoke(idOrToken string) *Grant {
	id := idOrToken
	if len(id) > len(tokenPrefix) && strings.EqualFold(id[:len(tokenPrefix)], tokenPrefix) {
		// A token's prefix in any case: a revocation that a mistyped
		// prefix made miss would leave the grant live.
		id, _, _ = strings.Cut(id[len(tokenPrefix):], ".")
	}
	return t.endGrant(id, ErrRevoked)
}

func (t *grantTable) end(id string, cause error) bool { return t.endGrant(id, cause) != nil }

func (t *grantTable) endGrant(id string, cause error) *Grant {
	t.mu.Lock()
	g, ok := t.byID[id]
	delete(t.byID, id)
	t.mu.Unlock()
	if !ok {
		return nil
	}
	g.timer.Stop()
	g.cancel(cause)
	return g
}

// closeAll ends every grant (shutdown).
func (t *grantTable) closeAll(cause error) {
	t.mu.Lock()
	ids := slices.Collect(maps.Keys(t.byID))
	t.mu.Unlock()
	for _, id := range ids {
		t.end(id, cause)
	}
}

// snapshot returns the live grants.
func (t *grantTable) snapshot() []*Grant {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Collect(maps.Values(t.byID))
}

// live counts the grants not yet ended.
func (t *grantTable) live() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

package bridge

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestGrantIssueLookupAllows(t *testing.T) {
	tab := newGrantTable()
	g, token, err := tab.issue(context.Background(), GrantSpec{Servers: map[string][]string{"fs": nil, "gh": {"create_issue"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(token, "cbt1."+g.ID+".") || len(token) != len("cbt1.")+16+1+22 {
		t.Fatalf("token %q has the wrong shape", token)
	}
	got, err := tab.lookup(token)
	if err != nil || got != g {
		t.Fatalf("lookup = %v, %v", got, err)
	}
	for _, c := range []struct {
		server, tool string
		want         bool
	}{
		{"fs", "read_file", true}, {"fs", "anything", true},
		{"gh", "create_issue", true}, {"gh", "delete_repo", false},
		{"other", "x", false},
	} {
		if g.Allows(c.server, c.tool) != c.want {
			t.Errorf("Allows(%q, %q) = %v", c.server, c.tool, !c.want)
		}
	}
	if s := g.Servers(); len(s) != 2 || s[0] != "fs" || s[1] != "gh" {
		t.Errorf("Servers() = %v", s)
	}
	if !g.Reaches("gh") || g.Reaches("other") {
		t.Error("Reaches is wrong")
	}
	if d := time.Until(g.Expires); d < DefaultGrantTTL-time.Minute || d > DefaultGrantTTL {
		t.Errorf("default expiry in %s, want about %s", d, DefaultGrantTTL)
	}
	tab.closeAll(errors.New("test over"))
}

func TestGrantRefusesBadTokens(t *testing.T) {
	tab := newGrantTable()
	g, token, err := tab.issue(context.Background(), GrantSpec{Servers: map[string][]string{"fs": nil}})
	if err != nil {
		t.Fatal(err)
	}
	defer tab.closeAll(errors.New("test over"))
	flipped := []byte(token)
	if flipped[len(flipped)-2] == 'A' {
		flipped[len(flipped)-2] = 'B'
	} else {
		flipped[len(flipped)-2] = 'A'
	}
	for _, bad := range []string{
		"", "cbt1.", "cbt1." + g.ID, "cbt1." + g.ID + ".", "cbt2" + token[4:],
		string(flipped), token + "A", token[:len(token)-1],
		"cbt1.0000000000000000." + token[len(token)-22:], // right secret, wrong id
		"cbt1." + g.ID + "." + strings.Repeat("!", 22),
	} {
		if _, err := tab.lookup(bad); !errors.Is(err, ErrBadToken) {
			t.Errorf("lookup(%q) = %v, want ErrBadToken", bad, err)
		}
	}
}

func TestGrantRevoke(t *testing.T) {
	tab := newGrantTable()
	g, token, _ := tab.issue(context.Background(), GrantSpec{Servers: map[string][]string{"fs": nil}})
	g2, token2, _ := tab.issue(context.Background(), GrantSpec{Servers: map[string][]string{"fs": nil}})
	if tab.revoke(token) == nil {
		t.Fatal("revoke by token found nothing")
	}
	if !errors.Is(context.Cause(g.Context()), ErrRevoked) {
		t.Errorf("cause = %v, want ErrRevoked", context.Cause(g.Context()))
	}
	if _, err := tab.lookup(token); err == nil {
		t.Error("a revoked token was accepted")
	}
	if tab.revoke(token) != nil {
		t.Error("revoking twice reported a live grant")
	}
	if tab.revoke(g2.ID) == nil {
		t.Fatal("revoke by id found nothing")
	}
	if _, err := tab.lookup(token2); err == nil {
		t.Error("a token revoked by id was accepted")
	}
	if tab.live() != 0 {
		t.Errorf("live = %d", tab.live())
	}
}

// A grant ends when its TTL runs out, not a moment before, with cause
// ErrGrantExpired. The clock is synctest's, so the test checks the
// boundary exactly and takes no time.
func TestGrantExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 90 * time.Second
		tab := newGrantTable()
		g, token, err := tab.issue(context.Background(), GrantSpec{Servers: map[string][]string{"fs": nil}, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl - time.Nanosecond)
		synctest.Wait()
		if err := g.Context().Err(); err != nil {
			t.Fatalf("grant ended %v before its TTL: %v", time.Nanosecond, context.Cause(g.Context()))
		}
		if _, err := tab.lookup(token); err != nil {
			t.Fatalf("a live token was refused: %v", err)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !errors.Is(context.Cause(g.Context()), ErrGrantExpired) {
			t.Errorf("cause = %v, want ErrGrantExpired", context.Cause(g.Context()))
		}
		if _, err := tab.lookup(token); err == nil {
			t.Error("an expired token was accepted")
		}
		if tab.live() != 0 {
			t.Errorf("live = %d after expiry, want 0", tab.live())
		}
	})
}

// Between its deadline and its timer firing, an expired grant is refused
// by the clock check alone.
func TestGrantLookupChecksClock(t *testing.T) {
	tab := newGrantTable()
	_, token, _ := tab.issue(context.Background(), GrantSpec{Servers: map[string][]string{"fs": nil}, TTL: time.Hour})
	defer tab.closeAll(errors.New("test over"))
	tab.now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	if _, err := tab.lookup(token); !errors.Is(err, ErrGrantExpired) {
		t.Errorf("lookup = %v, want ErrGrantExpired", err)
	}
}

func TestGrantSpecErrors(t *testing.T) {
	tab := newGrantTable()
	if _, _, err := tab.issue(context.Background(), GrantSpec{}); err == nil || errors.Is(err, ErrBadTTL) {
		t.Errorf("a grant naming no server: %v", err)
	}
	// Every TTL out of range is refused, never rounded up to the minimum
	// or replaced by the default; the zero value alone means the default.
	for _, ttl := range []time.Duration{
		-time.Second, -time.Nanosecond, time.Nanosecond, 500 * time.Microsecond,
		MinGrantTTL - time.Nanosecond, MaxGrantTTL + time.Nanosecond, MaxGrantTTL + time.Second,
		time.Duration(math.MinInt64), time.Duration(math.MaxInt64),
	} {
		g, _, err := tab.issue(context.Background(), GrantSpec{Servers: map[string][]string{"fs": nil}, TTL: ttl})
		if !errors.Is(err, ErrBadTTL) || g != nil {
			t.Errorf("ttl %v: grant %v, err %v; want ErrBadTTL", ttl, g, err)
		}
	}
	if n := tab.live(); n != 0 {
		t.Errorf("%d grants live after refusals", n)
	}
	for _, ttl := range []time.Duration{MinGrantTTL, MaxGrantTTL} {
		g, _, err := tab.issue(context.Background(), GrantSpec{Servers: map[string][]string{"fs": nil}, TTL: ttl})
		if err != nil {
			t.Errorf("ttl %v: %v", ttl, err)
			continue
		}
		tab.end(g.ID, ErrRevoked)
	}
}

func TestGrantTokensAreDistinct(t *testing.T) {
	tab := newGrantTable()
	defer tab.closeAll(errors.New("test over"))
	seen := map[string]bool{}
	for range 1000 {
		_, token, err := tab.issue(context.Background(), GrantSpec{Servers: map[string][]string{"fs": nil}})
		if err != nil {
			t.Fatal(err)
		}
		if seen[token] {
			t.Fatal("token repeated")
		}
		seen[token] = true
	}
}

// Ending the bridge's context ends every grant made under it.
func TestGrantFollowsParent(t *testing.T) {
	tab := newGrantTable()
	parent, cancel := context.WithCancel(context.Background())
	g, _, _ := tab.issue(parent, GrantSpec{Servers: map[string][]string{"fs": nil}})
	cancel()
	<-g.Context().Done()
	tab.closeAll(errors.New("test over"))
}

// A revoke waits for the calls running under the grant to be counted,
// and no longer than its context allows.
func TestGrantUsageSettled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var u grantUsage
		u.settled(context.Background()) // nothing runs: at once
		u.begin()
		u.begin()
		done := make(chan struct{})
		go func() { u.settled(context.Background()); close(done) }()
		synctest.Wait()
		u.end()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("settled with a call still running")
		default:
		}
		u.end()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("still waiting after the last call ended")
		}
		u.begin()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		u.settled(ctx)
		if took := time.Since(start); took != time.Second {
			t.Errorf("settled gave up after %v, want its context's second", took)
		}
		u.end()
	})
}

package mcpauth

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// StoredAuthorizer authorizes a server's requests with the tokens a
// login saved: it sends the access token, refreshes it (under the
// store's lock, so two capbridge processes never refresh at once, and
// saving the new tokens) before it expires and once when the server
// refuses it, and reports ErrNeedsLogin when there is no token, no
// refresh token, or the refresh is refused. Safe for concurrent use.
type StoredAuthorizer struct {
	store  Store
	server string
	hc     *http.Client

	mu    sync.Mutex
	saved *Saved
}

// NewStoredAuthorizer returns the authorizer of server's saved login.
func NewStoredAuthorizer(store Store, server string, hc *http.Client) *StoredAuthorizer {
	return &StoredAuthorizer{store: store, server: server, hc: hc}
}

// Authorize sends the saved access token, refreshed first when it is
// about to expire. With no saved login it sends nothing: a server that
// needs none is served, and one that does answers 401 (Challenge).
func (a *StoredAuthorizer) Authorize(ctx context.Context, h http.Header) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.saved == nil {
		sv, err := a.store.Load(a.server)
		if errors.Is(err, ErrNeedsLogin) {
			return nil
		}
		if err != nil {
			return err
		}
		a.saved = sv
	}
	if !a.saved.Expiry.IsZero() && time.Until(a.saved.Expiry) < renewBefore {
		if err := a.refreshLocked(ctx, a.saved.AccessToken); err != nil {
			return err
		}
	}
	h.Set("Authorization", "Bearer "+a.saved.AccessToken)
	return nil
}

// Challenge refreshes once when the server refuses the token (401); a
// 403 insufficient_scope needs a new login with the scopes it names.
func (a *StoredAuthorizer) Challenge(ctx context.Context, resp *http.Response) (bool, error) {
	ch, _ := ParseChallenge(resp.Header.Values("Www-Authenticate"))
	if resp.StatusCode == http.StatusForbidden {
		if ch.Error == "insufficient_scope" {
			return false, &authError{step: "the server needs the scopes " + quote(ch.Scope) + ": log in again", err: ErrNeedsLogin}
		}
		return false, nil
	}
	sent := strings.TrimPrefix(resp.Request.Header.Get("Authorization"), "Bearer ")
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.saved == nil {
		if sv, err := a.store.Load(a.server); err == nil {
			a.saved = sv // a login since: try it
			return true, nil
		}
		return false, ErrNeedsLogin
	}
	if err := a.refreshLocked(ctx, sent); err != nil {
		return false, err
	}
	return true, nil
}

func quote(s string) string { return `"` + s + `"` }

// refreshLocked refreshes the token if it is still sent (another
// request, or another capbridge, may have refreshed it already).
func (a *StoredAuthorizer) refreshLocked(ctx context.Context, sent string) error {
	unlock, err := a.store.Lock(a.server)
	if err != nil {
		return err
	}
	defer unlock()
	if sv, err := a.store.Load(a.server); err == nil {
		a.saved = sv // what another process saved
	}
	if a.saved.AccessToken != sent && (a.saved.Expiry.IsZero() || time.Until(a.saved.Expiry) >= renewBefore) {
		return nil
	}
	if a.saved.RefreshToken == "" {
		return &authError{step: "the token expired and there is no refresh token", err: ErrNeedsLogin}
	}
	cfg := &oauth2.Config{ClientID: a.saved.ClientID, ClientSecret: a.saved.ClientSecret, Scopes: a.saved.Scopes,
		Endpoint: oauth2.Endpoint{TokenURL: a.saved.TokenEndpoint}}
	old := &oauth2.Token{RefreshToken: a.saved.RefreshToken, Expiry: time.Unix(1, 0)}
	tok, err := cfg.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, a.hc), old).Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return &authError{step: "refreshing the token", err: errors.Join(tokenError(err), ErrNeedsLogin)}
		}
		return fail("refreshing the token", err)
	}
	next := *a.saved
	next.AccessToken, next.Expiry = tok.AccessToken, tok.Expiry
	if tok.RefreshToken != "" {
		next.RefreshToken = tok.RefreshToken // rotated
	}
	if err := a.store.Save(&next); err != nil {
		return err
	}
	a.saved = &next
	return nil
}

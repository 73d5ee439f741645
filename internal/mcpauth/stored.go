package mcpauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
)

// StoredAuthorizer authorizes a server's requests with the tokens a
// login saved: it sends the access token, refreshes it (under the
// store's lock, so two capbridge processes never refresh at once, and
// saving the new tokens) before it expires and once when the server
// refuses it, and reports ErrNeedsLogin when there is no token, no
// refresh token, or the refresh is refused. A login saved for another
// URL under the server's name (the config's url changed since) is never
// sent, and one removed (capbridge logout) is not refreshed back into
// the store. A refreshed login that cannot be saved is used from memory
// (the server has rotated the refresh token, so the store's is spent)
// and saved at the next chance, for as long as the store still holds the
// login it replaced. Safe for concurrent use.
type StoredAuthorizer struct {
	// Warn, when set before first use, is told of a failure that leaves
	// the login working but the store behind it: a refreshed login that
	// could not be saved. It is called while the authorizer holds its turn and
	// must not call the authorizer.
	Warn func(error)

	store  Store
	server string
	url    string // the server's URL, which the saved login must be for
	hc     *http.Client
	save   func(*Saved) error // store.Save but in tests
	// limit bounds a refresh's request: loginFetchTimeout but in tests.
	limit time.Duration

	turn  turn   // held by Authorize and Challenge, a refresh's request included
	saved *Saved // set by setSavedLocked alone
	// stepUp is saved.StepUp, for StepUp: a status asks for it, and must
	// not wait behind a token refresh that holds the turn for a network
	// request.
	stepUp atomic.Pointer[[]string]
	// creds is what the login in use lets a server echo (Credentials),
	// replaced with saved: read without the turn, which a refresh holds for a
	// network request.
	creds atomic.Pointer[Credentials]
	// looked: the store was read once. Without a saved login nothing is
	// sent, and the store is read again only when the server refuses a
	// request (Challenge), not on every request: a server that needs no
	// login costs no file access per call.
	looked bool
	// unsaved is a refreshed login the store could not take, and
	// unsavedFrom the refresh token of the store's login it replaces:
	// while the store holds that login, unsaved is the current one.
	unsaved     *Saved
	unsavedFrom string
}

// NewStoredAuthorizer returns the authorizer of the login saved for the
// server named server at url.
func NewStoredAuthorizer(store Store, server, url string, hc *http.Client) *StoredAuthorizer {
	return &StoredAuthorizer{store: store, server: server, url: url, hc: hc, save: store.Save, limit: loginFetchTimeout, turn: newTurn()}
}

// currentLocked returns the login in force: the store's, or the
// refreshed one it could not take while it still holds the login that
// one replaced. A login removed (capbridge logout) or replaced (a login,
// another process's refresh) since is the store's word, and the unsaved
// one is dropped.
func (a *StoredAuthorizer) currentLocked() (*Saved, error) {
	sv, err := a.load()
	if a.unsaved == nil {
		return sv, err
	}
	switch {
	case err != nil && !errors.Is(err, ErrNeedsLogin):
		return nil, err // the store could not be read: the unsaved login stays
	case err != nil || sv.RefreshToken != a.unsavedFrom:
		a.unsaved = nil
		return sv, err
	}
	next := *a.unsaved
	return &next, nil
}

// saveLocked saves sv, the login in force from now on, under the
// store's lock. Should the store not take it, sv is kept as unsaved, in
// force over the store's login from (that login's refresh token), and
// Warn is told.
func (a *StoredAuthorizer) saveLocked(sv *Saved, from string) {
	if err := a.save(sv); err != nil {
		if a.unsaved == nil {
			a.unsavedFrom = from
		}
		a.unsaved = sv
		if a.Warn != nil {
			a.Warn(fmt.Errorf("%w; the refreshed login is used from memory until it can be saved, and is lost if capbridge stops or reconnects to the server first", err))
		}
	} else {
		a.unsaved = nil
	}
	a.setSavedLocked(sv)
}

// load reads the saved login, which must be for this server's URL.
func (a *StoredAuthorizer) load() (*Saved, error) {
	sv, err := a.store.Load(a.server)
	if err != nil {
		return nil, err
	}
	// The endpoint, not its query: an API key in the query may rotate
	// without the login's token changing audience.
	if shownURL(sv.URL) != shownURL(a.url) {
		step := fmt.Sprintf("the login saved for %s is for %s, not %s: run capbridge login %s", a.server, shownURL(sv.URL), shownURL(a.url), a.server)
		return nil, &authError{step: step, err: ErrNeedsLogin}
	}
	return sv, nil
}

// shownURL is raw without its query, fragment and user information.
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return shown(u)
}

// Authorize sends the saved access token, refreshed first when it is
// about to expire. With no saved login it sends nothing: a server that
// needs none is served, and one that does answers 401 (Challenge).
func (a *StoredAuthorizer) Authorize(ctx context.Context, h http.Header) error {
	if err := a.turn.take(ctx); err != nil {
		return err
	}
	defer a.turn.give()
	if a.saved == nil {
		if a.looked {
			return nil
		}
		a.looked = true
		sv, err := a.load()
		if errors.Is(err, ErrNeedsLogin) {
			return nil
		}
		if err != nil {
			return err
		}
		a.setSavedLocked(sv)
	}
	if !a.saved.Expiry.IsZero() && time.Until(a.saved.Expiry) < renewBefore {
		if err := a.refreshLocked(ctx, a.saved.AccessToken); err != nil {
			return err
		}
	}
	h.Set("Authorization", "Bearer "+a.saved.AccessToken)
	return nil
}

// Challenge answers the server's refusal of a request Authorize
// prepared. A login saved since the token was sent (capbridge login, in
// this process or another) is tried first. Otherwise a 401 refreshes the
// token once; a 403 insufficient_scope is a step-up: the scopes the
// server named are saved for the next login (ErrNeedsLogin, whose
// message says which), unless the token carries them already (a new
// login would not help: the server is refusing for another reason) or
// maxStepUps logins have stepped up in a row.
func (a *StoredAuthorizer) Challenge(ctx context.Context, resp *http.Response) (bool, error) {
	ch, _ := ParseChallenge(resp.Header.Values("Www-Authenticate"))
	if resp.StatusCode == http.StatusForbidden && ch.Error != "insufficient_scope" {
		return false, nil // forbidden for another reason: the caller sees the 403
	}
	sent := strings.TrimPrefix(resp.Request.Header.Get("Authorization"), "Bearer ")
	if err := a.turn.take(ctx); err != nil {
		return false, err
	}
	defer a.turn.give()
	sv, err := a.currentLocked()
	if err == nil && sv.AccessToken != sent {
		a.setSavedLocked(sv) // a newer token, from a login or another process's refresh
		return true, nil
	}
	if a.saved == nil {
		if errors.Is(err, ErrNeedsLogin) {
			return false, err // none, or one for another URL: says which
		}
		return false, ErrNeedsLogin
	}
	if resp.StatusCode == http.StatusForbidden {
		return false, a.stepUpLocked(ch)
	}
	if err := a.refreshLocked(ctx, sent); err != nil {
		return false, err
	}
	return true, nil
}

// ErrStepUp is matched by the error of a request refused because the
// login's token lacks scopes the server wants: a new login asks for them.
// Such an error matches ErrNeedsLogin and ErrAuth too.
var ErrStepUp = errors.New("mcpauth: the server wants scopes the login's token lacks")

// stepUpError is a refusal for want of scopes (403 insufficient_scope).
type stepUpError struct{ want, missing []string }

func (e *stepUpError) Error() string {
	return fmt.Sprintf("mcpauth: the server wants the scopes %q, which the login's token lacks (%q missing): log in again", strings.Join(e.want, " "), strings.Join(e.missing, " "))
}

func (e *stepUpError) Is(target error) bool {
	return target == ErrStepUp || target == ErrNeedsLogin || target == ErrAuth
}

// stepUpLocked records the scopes a 403 insufficient_scope named, for
// the next login.
func (a *StoredAuthorizer) stepUpLocked(ch Challenge) error {
	need := strings.Fields(ch.Scope)
	have := a.saved.granted()
	missing := slices.DeleteFunc(slices.Clone(need), func(s string) bool { return slices.Contains(have, s) })
	switch {
	case len(need) == 0:
		return fail("the server refused the token (403 insufficient_scope)", errors.New("without naming the scopes it wants; log in again with oauth.scopes set"))
	case len(missing) == 0:
		return fail("the server refused the token (403 insufficient_scope)", fmt.Errorf("wanting the scopes %q, which the token was granted: a new login would not help", ch.Scope))
	case a.saved.StepUps >= maxStepUps:
		return fail("the server refused the token (403 insufficient_scope)", fmt.Errorf("wanting the scopes %q after %d logins for more scopes: log out, check the server's scopes, and log in again", ch.Scope, a.saved.StepUps))
	}
	unlock, err := a.store.Lock(a.server)
	if err != nil {
		return err
	}
	defer unlock()
	sv, err := a.currentLocked()
	if err != nil {
		return err
	}
	sv.StepUp = union(sv.StepUp, need)
	if err := a.save(sv); err != nil {
		return err
	}
	a.unsaved = nil
	a.setSavedLocked(sv)
	return &stepUpError{want: need, missing: missing}
}

// StepUp returns the scopes a server asked for that the saved login's
// token lacks (a login asks for them), or nil. It never waits, not even
// for a refresh in progress: a server's status asks for it under the
// server's lock.
func (a *StoredAuthorizer) StepUp() []string {
	if p := a.stepUp.Load(); p != nil {
		return slices.Clone(*p)
	}
	return nil
}

// Credentials are the secrets of the login a StoredAuthorizer uses, by
// name ("login access_token"), for redacting what a server quotes of
// them. A value is replaced, never changed, when the login is (a refresh
// rotates the tokens): the pointer tells a caller whether what it built
// from them is still current.
type Credentials struct {
	Values map[string]string
}

// Credentials returns the credentials of the login in use; nil before
// one is loaded or after it is gone. It never waits behind a refresh.
func (a *StoredAuthorizer) Credentials() *Credentials { return a.creds.Load() }

func (a *StoredAuthorizer) setSavedLocked(sv *Saved) {
	a.saved = sv
	if sv == nil {
		a.creds.Store(nil)
	} else {
		a.creds.Store(&Credentials{Values: map[string]string{
			"login access_token": sv.AccessToken, "login refresh_token": sv.RefreshToken, "login client_secret": sv.ClientSecret,
		}})
	}
	if sv == nil || len(sv.StepUp) == 0 {
		a.stepUp.Store(nil)
		return
	}
	want := slices.Clone(sv.StepUp)
	a.stepUp.Store(&want)
}

// refreshLocked refreshes the token if it is still sent (another
// request, or another capbridge, may have refreshed it already). The
// store is read again under its lock first: a login removed or replaced
// by one for another URL since is not refreshed, so a logout is not
// undone by a serve that still holds the tokens.
func (a *StoredAuthorizer) refreshLocked(ctx context.Context, sent string) error {
	unlock, err := a.store.Lock(a.server)
	if err != nil {
		return err
	}
	defer unlock()
	sv, err := a.currentLocked()
	if errors.Is(err, ErrNeedsLogin) {
		a.setSavedLocked(nil)
		if err == ErrNeedsLogin {
			return &authError{step: "the saved login was removed (capbridge logout)", err: ErrNeedsLogin}
		}
		return err
	}
	if err != nil {
		return err
	}
	a.setSavedLocked(sv) // what another process may have saved
	if a.saved.AccessToken != sent && (a.saved.Expiry.IsZero() || time.Until(a.saved.Expiry) >= renewBefore) {
		if a.unsaved != nil {
			a.saveLocked(sv, a.unsavedFrom) // another chance to save it
		}
		return nil
	}
	if a.saved.RefreshToken == "" {
		return &authError{step: "the token expired and there is no refresh token", err: ErrNeedsLogin}
	}
	cfg := &oauth2.Config{ClientID: a.saved.ClientID, ClientSecret: a.saved.ClientSecret, Scopes: a.saved.Scopes,
		Endpoint: oauth2.Endpoint{TokenURL: a.saved.TokenEndpoint, AuthStyle: savedAuthStyle(a.saved)}}
	old := &oauth2.Token{RefreshToken: a.saved.RefreshToken, Expiry: time.Unix(1, 0)}
	hc := a.hc
	if a.saved.Resource != "" {
		hc = withFormParam(a.hc, "resource", a.saved.Resource)
	}
	// Bounded whatever the caller's deadline: the turn and the store's
	// lock are held meanwhile, and a listen stream's context has none.
	ctx, cancel := context.WithTimeout(ctx, a.limit)
	defer cancel()
	tok, err := cfg.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, hc), old).Token()
	if err != nil {
		sent := []credential{{"refresh_token", a.saved.RefreshToken}, {"client_secret", a.saved.ClientSecret}, {"access_token", a.saved.AccessToken}}
		if _, ok := errors.AsType[*oauth2.RetrieveError](err); ok {
			return &authError{step: "refreshing the token", err: errors.Join(tokenError(err, sent...), ErrNeedsLogin)}
		}
		return fail("refreshing the token", tokenError(err, sent...))
	}
	if tok, err = bearer(tok, time.Now()); err != nil {
		return fail("refreshing the token", err)
	}
	next := *a.saved
	next.AccessToken, next.Expiry = tok.AccessToken, tok.Expiry
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		next.Granted = strings.Fields(s)
	}
	if tok.RefreshToken != "" {
		next.RefreshToken = tok.RefreshToken // rotated
	}
	// The server may have rotated the refresh token: from here the
	// store's is spent, and next must be used whether or not it is saved.
	a.saveLocked(&next, a.saved.RefreshToken)
	return nil
}

// savedAuthStyle is how a saved login's client authenticates; a login
// saved before the method was recorded sends its secret, if any, in the
// Authorization header (RFC 6749's must-support).
func savedAuthStyle(sv *Saved) oauth2.AuthStyle {
	switch {
	case sv.TokenAuth != "":
		return authStyle(sv.TokenAuth)
	case sv.ClientSecret != "":
		return oauth2.AuthStyleInHeader
	}
	return oauth2.AuthStyleInParams
}

// maxRevocation bounds the body of a revocation answer read.
const maxRevocation = 4 << 10

// Revoke asks the authorization server to revoke a saved login's tokens
// (RFC 7009): the refresh token, which revokes the access token with it
// at most servers, then the access token. It reports false when the
// server advertises no revocation endpoint. The tokens are sent only to
// the endpoint the login's own authorization server named.
func Revoke(ctx context.Context, hc *http.Client, sv *Saved) (bool, error) {
	if sv.RevocationEndpoint == "" {
		return false, nil
	}
	for _, t := range []struct{ token, hint string }{{sv.RefreshToken, "refresh_token"}, {sv.AccessToken, "access_token"}} {
		if t.token == "" {
			continue
		}
		form := url.Values{"token": {t.token}, "token_type_hint": {t.hint}}
		style := savedAuthStyle(sv)
		if style == oauth2.AuthStyleInParams {
			form.Set("client_id", sv.ClientID)
			if sv.ClientSecret != "" {
				form.Set("client_secret", sv.ClientSecret)
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, sv.RevocationEndpoint, strings.NewReader(form.Encode()))
		if err != nil {
			return true, fail("revoking the tokens", err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if style == oauth2.AuthStyleInHeader {
			req.SetBasicAuth(url.QueryEscape(sv.ClientID), url.QueryEscape(sv.ClientSecret))
		}
		resp, err := hc.Do(req)
		if err != nil {
			return true, fail("revoking the tokens at "+sv.RevocationEndpoint, err)
		}
		var out struct {
			Error string `json:"error"`
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxRevocation))
		_ = resp.Body.Close()
		// RFC 7009 §2.2: 200 whether or not the token was valid; an
		// unsupported_token_type for one kind is not a failure.
		if resp.StatusCode != http.StatusOK {
			_ = json.Unmarshal(b, &out)
			if out.Error == "unsupported_token_type" {
				continue
			}
			// The error may quote the token it was asked to revoke.
			return true, fail("revoking the tokens at "+sv.RevocationEndpoint, fmt.Errorf("HTTP %d %s", resp.StatusCode, said(out.Error, req)))
		}
	}
	return true, nil
}

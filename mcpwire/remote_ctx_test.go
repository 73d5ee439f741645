package mcpwire

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
)

// ctxAuth is an Authorizer that gives up, in Authorize or in Challenge,
// as a waiter behind another request's token fetch does: its request's
// context ends.
type ctxAuth struct {
	inChallenge bool
	cancel      context.CancelFunc
}

func (a ctxAuth) Authorize(ctx context.Context, _ http.Header) error {
	if a.inChallenge {
		return nil
	}
	return a.giveUp(ctx)
}

func (a ctxAuth) Challenge(ctx context.Context, _ *http.Response) (bool, error) {
	return false, a.giveUp(ctx)
}

func (a ctxAuth) giveUp(ctx context.Context) error {
	a.cancel()
	<-ctx.Done()
	return context.Cause(ctx)
}

// A request that gives up waiting for its credentials ends as cancelled,
// not as a refusal of its authorization, which would mark the server as
// needing a login it does not need.
func TestAuthorizationWaitEndsAsCancelled(t *testing.T) {
	defer leakcheck.Check(t)()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer ts.Close()
	for _, inChallenge := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		_, err := authorizedDo(ctx, ts.Client(), ctxAuth{inChallenge, cancel}, "tools/call", func() (*http.Request, error) {
			return http.NewRequestWithContext(ctx, http.MethodPost, ts.URL, nil)
		})
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrAuthorization) {
			t.Errorf("a request cancelled while waiting (in Challenge: %v): %v, want its cancellation, not an authorization failure", inChallenge, err)
		}
	}
}

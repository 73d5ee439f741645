package mcpauth

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
	"github.com/capbridge/capbridge/internal/testkit/oauthtest"
)

// refresherEnv makes the test binary a refresher: a capbridge's saved
// login authorizer in a process of its own (TestConcurrentRefresh).
const refresherEnv = "MCPAUTH_TEST_REFRESHER"

// refresherURLEnv is the URL of the server whose login the refresher uses.
const refresherURLEnv = "MCPAUTH_TEST_REFRESHER_URL"

// refresher is one process using the saved login of the store the
// environment names: it says "ready", waits for "go" on stdin, authorizes
// a request (refreshing the token about to expire) and prints the token
// it would send.
func refresher() int {
	a := NewStoredAuthorizer(Store{Dir: os.Getenv(refresherEnv)}, "web", os.Getenv(refresherURLEnv), http.DefaultClient)
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() || in.Text() != "go" {
		return 2
	}
	h := http.Header{}
	if err := a.Authorize(context.Background(), h); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(h.Get("Authorization"))
	return 0
}

// TestConcurrentRefresh: two capbridge processes that find the same saved
// token about to expire at once refresh it once between them, through
// the store's lock: exactly one refresh request reaches the
// authorization server, and both send the new token (the second finds
// it saved when it gets the lock).
func TestConcurrentRefresh(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as := oauthtest.New(oauthtest.Options{AuthMethods: []string{"none"}})
	t.Cleanup(as.Close)
	_, srv := guarded(t, as, mcptest.HTTPOptions{})
	sv, err := Login(context.Background(), LoginOptions{Server: "web", URL: srv, HTTP: as.Client(), Open: browser(as.Client())})
	if err != nil {
		t.Fatal(err)
	}
	sv.Expiry = time.Now().Add(time.Second) // within renewBefore: both must renew
	store := Store{Dir: filepath.Join(t.TempDir(), "oauth")}
	if err := store.Save(sv); err != nil {
		t.Fatal(err)
	}
	// The lock is held while both start, so that both wait for it.
	unlock, err := store.Lock("web")
	if err != nil {
		t.Fatal(err)
	}
	type proc struct {
		cmd *exec.Cmd
		in  io.WriteCloser
		out *bufio.Scanner
	}
	var procs []proc
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), refresherEnv+"="+store.Dir, refresherURLEnv+"="+srv)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := proc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
		procs = append(procs, p)
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if !p.out.Scan() || p.out.Text() != "ready" {
			t.Fatalf("refresher: %q", p.out.Text())
		}
	}
	for _, p := range procs {
		if _, err := io.WriteString(p.in, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	unlock()
	var sent []string
	for _, p := range procs {
		if !p.out.Scan() {
			t.Fatalf("a refresher said nothing: %v", p.cmd.Wait())
		}
		sent = append(sent, p.out.Text())
		if err := p.cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	refreshes := 0
	for _, r := range as.Requests() {
		if r["grant_type"][0] == "refresh_token" {
			refreshes++
		}
	}
	after, err := store.Load("web")
	if err != nil {
		t.Fatal(err)
	}
	if refreshes != 1 || sent[0] != sent[1] || sent[0] != "Bearer "+after.AccessToken || after.AccessToken == sv.AccessToken {
		t.Fatalf("%d refreshes reached the server (want 1); sent %q; saved %s…", refreshes, sent, after.AccessToken[:min(8, len(after.AccessToken))])
	}
	if strings.Contains(sent[0], sv.AccessToken) {
		t.Fatal("the old token was sent")
	}
}

// TestStepUpDuringRefresh: StepUp answers while a refresh waits on a
// token endpoint that does not answer. A status asks for it, and behind
// a status that waited, the server's retirement and shutdown would too,
// for as long as the authorization server kept the request.
func TestStepUpDuringRefresh(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	hit, release := make(chan struct{}, 1), make(chan struct{})
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case hit <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
	}))
	t.Cleanup(as.Close)
	const url = "http://127.0.0.1:1/mcp"
	store := Store{Dir: filepath.Join(t.TempDir(), "oauth")}
	if err := store.Save(&Saved{Server: "web", URL: url, TokenEndpoint: as.URL + "/token", ClientID: "c",
		AccessToken: "access", RefreshToken: "refresh", Expiry: time.Now().Add(time.Second), StepUp: []string{"mcp:write"}}); err != nil {
		t.Fatal(err)
	}
	a := NewStoredAuthorizer(store, "web", url, as.Client())
	refreshed := make(chan error, 1)
	go func() { refreshed <- a.Authorize(context.Background(), http.Header{}) }()
	<-hit // the refresh holds the authorizer's lock, waiting
	got := make(chan []string, 1)
	go func() { got <- a.StepUp() }()
	select {
	case want := <-got:
		if len(want) != 1 || want[0] != "mcp:write" {
			t.Errorf("StepUp() = %q", want)
		}
		close(release)
	case <-time.After(30 * time.Second): // a backstop: it answers at once
		t.Error("StepUp waited for the refresh")
		close(release)
		<-got
	}
	<-refreshed
}

// rotatingAS is an authorization server's token endpoint that rotates
// refresh tokens: each refresh_token grant with the current refresh
// token answers access token aN and refresh token rN, and spends the one
// it was given; any other is invalid_grant.
type rotatingAS struct {
	mu      sync.Mutex
	current string
	n       int
	grants  int
}

func (as *rotatingAS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	as.mu.Lock()
	defer as.mu.Unlock()
	as.grants++
	w.Header().Set("Content-Type", "application/json")
	if r.FormValue("grant_type") != "refresh_token" || r.FormValue("refresh_token") != as.current {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"invalid_grant"}`)
		return
	}
	as.n++
	as.current = fmt.Sprintf("r%d", as.n)
	fmt.Fprintf(w, `{"access_token":"a%d","refresh_token":%q,"token_type":"Bearer","expires_in":3600}`, as.n, as.current)
}

// A refreshed login the store cannot take is not lost: the server has
// rotated the refresh token, so the store's is spent. The new tokens are
// sent, Warn is told, and the next refresh uses them and saves its own.
// A logout or a new login in the store meanwhile is the store's word.
func TestRefreshedLoginUnsaved(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	const url = "http://127.0.0.1:1/mcp"
	for _, then := range []string{"the next refresh saves", "a logout meanwhile", "a new login meanwhile"} {
		t.Run(then, func(t *testing.T) {
			as := &rotatingAS{current: "r0"}
			ts := httptest.NewServer(as)
			defer ts.Close()
			store := Store{Dir: filepath.Join(t.TempDir(), "oauth")}
			login := func(access, refresh string, life time.Duration) {
				t.Helper()
				if err := store.Save(&Saved{Server: "web", URL: url, TokenEndpoint: ts.URL + "/token", ClientID: "c",
					AccessToken: access, RefreshToken: refresh, Expiry: time.Now().Add(life)}); err != nil {
					t.Fatal(err)
				}
			}
			login("a0", "r0", time.Second) // about to expire: the first use refreshes it
			a := NewStoredAuthorizer(store, "web", url, ts.Client())
			var warned []error
			a.Warn = func(err error) { warned = append(warned, err) }
			full := errors.New("no space left on device")
			a.save = func(*Saved) error { return full }

			h := http.Header{}
			if err := a.Authorize(context.Background(), h); err != nil {
				t.Fatalf("Authorize, the store refusing the refreshed login: %v", err)
			}
			if got := h.Get("Authorization"); got != "Bearer a1" {
				t.Fatalf("sent %q, want the refreshed token", got)
			}
			if len(warned) != 1 || !errors.Is(warned[0], full) {
				t.Fatalf("Warn told %v", warned)
			}
			a.save = store.Save

			switch then {
			case "a logout meanwhile":
				if err := store.Delete("web"); err != nil {
					t.Fatal(err)
				}
			case "a new login meanwhile":
				login("b0", "s0", time.Hour)
			}
			resp := refusal(url, http.StatusUnauthorized, "a1", "")
			retry, err := a.Challenge(context.Background(), resp)
			switch then {
			case "the next refresh saves":
				if !retry || err != nil {
					t.Fatalf("Challenge: %v, %v", retry, err)
				}
				sv, err := store.Load("web")
				if err != nil || sv.AccessToken != "a2" || sv.RefreshToken != "r2" {
					t.Fatalf("saved %+v, %v; want a2, r2", sv, err)
				}
			case "a logout meanwhile":
				if retry || !errors.Is(err, ErrNeedsLogin) {
					t.Fatalf("Challenge: %v, %v; want needs login", retry, err)
				}
				if _, err := store.Load("web"); !errors.Is(err, ErrNeedsLogin) {
					t.Fatalf("the logout was undone: %v", err)
				}
			case "a new login meanwhile":
				if !retry || err != nil {
					t.Fatalf("Challenge: %v, %v", retry, err)
				}
			}
			h = http.Header{}
			err = a.Authorize(context.Background(), h)
			want := map[string]string{"the next refresh saves": "Bearer a2", "a logout meanwhile": "", "a new login meanwhile": "Bearer b0"}[then]
			if got := h.Get("Authorization"); got != want {
				t.Errorf("then sent %q (%v), want %q", got, err, want)
			}
			if then != "the next refresh saves" && as.grants != 1 {
				t.Errorf("%d refresh grants, want the first only", as.grants)
			}
		})
	}
}

// silentServer is an endpoint that accepts every request and answers
// none until the test ends; hit receives once a request has arrived.
func silentServer(t *testing.T) (as *httptest.Server, hit <-chan struct{}) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	as = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(as.Close)
	t.Cleanup(func() { close(release) })
	return as, arrived
}

// A token endpoint that never answers holds a refresh no longer than its
// bound, though the request that needed it (a listen stream) has no
// deadline: the authorizer's turn and the store's lock are held
// meanwhile, and capbridge login and logout need that lock. A request
// that arrives meanwhile waits no longer than its own context.
func TestRefreshBounded(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as, hit := silentServer(t)
	const url = "http://127.0.0.1:1/mcp"
	store := Store{Dir: filepath.Join(t.TempDir(), "oauth")}
	if err := store.Save(&Saved{Server: "web", URL: url, TokenEndpoint: as.URL + "/token", ClientID: "c",
		AccessToken: "access", RefreshToken: "refresh", Expiry: time.Now().Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	a := NewStoredAuthorizer(store, "web", url, as.Client())
	a.limit = 200 * time.Millisecond
	refreshed := make(chan error, 1)
	// A listen stream's request, which has no deadline.
	go func() { refreshed <- a.Authorize(context.Background(), http.Header{}) }()
	<-hit // the refresh holds the turn, waiting

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Authorize(ended, http.Header{}); !errors.Is(err, context.Canceled) {
		t.Errorf("a request whose context ended, behind the refresh: %v, want its own cancellation", err)
	}
	select {
	case err := <-refreshed:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the refresh against a silent token endpoint: %v, want its bound's deadline", err)
		}
	case <-time.After(time.Minute): // a backstop: the bound is 200 ms
		t.Fatal("the refresh still waits on a token endpoint that never answers")
	}
	unlock, err := store.Lock("web") // what login and logout take
	if err != nil {
		t.Fatalf("the store's lock after the refresh gave up: %v", err)
	}
	unlock()
}

// A token endpoint's 200 whose JSON does not parse makes x/oauth2 quote
// the answer in its error; a server that echoes the refresh token there
// must not put it, or an unbounded answer, into the errors that status,
// logs and a program's denial repeat.
func TestRefreshAnswerQuotedSafely(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	const refresh = "refresh-token-secret-0123456789"
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"a","expires_in":"%s%s"}`, r.PostForm.Get("refresh_token"), strings.Repeat("9", 200<<10))
	}))
	t.Cleanup(as.Close)
	const url = "http://127.0.0.1:1/mcp"
	store := Store{Dir: filepath.Join(t.TempDir(), "oauth")}
	if err := store.Save(&Saved{Server: "web", URL: url, TokenEndpoint: as.URL + "/token", ClientID: "c",
		AccessToken: "access", RefreshToken: refresh, Expiry: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	err := NewStoredAuthorizer(store, "web", url, as.Client()).Authorize(context.Background(), http.Header{})
	if err == nil {
		t.Fatal("an unusable answer refreshed the token")
	}
	if msg := err.Error(); strings.Contains(msg, refresh) || len(msg) > 1024 || !strings.Contains(msg, "[redacted:refresh_token]") {
		t.Errorf("the refresh's error (%d bytes) quotes the refresh token or the whole answer: %.300q", len(msg), msg)
	}
}

// The client-credentials Authorizer holds its turn across a token
// request too: a silent token endpoint holds the fetch no longer than
// its bound, and a request that arrives meanwhile waits no longer than
// its own context.
func TestClientCredentialsFetchBounded(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	as, hit := silentServer(t)
	a, err := NewAuthorizer("http://127.0.0.1:1/mcp", ClientCredentials{ClientID: "c", Secret: "s3cret"}, as.Client())
	if err != nil {
		t.Fatal(err)
	}
	a.meta = &ServerMetadata{Issuer: as.URL, TokenEndpoint: as.URL + "/token"} // as a first challenge's discovery leaves it
	a.limit = 200 * time.Millisecond
	fetched := make(chan error, 1)
	go func() { fetched <- a.Authorize(context.Background(), http.Header{}) }()
	<-hit // the fetch holds the turn, waiting

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Authorize(ended, http.Header{}); !errors.Is(err, context.Canceled) {
		t.Errorf("a request whose context ended, behind the fetch: %v, want its own cancellation", err)
	}
	select {
	case err := <-fetched:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the fetch from a silent token endpoint: %v, want its bound's deadline", err)
		}
	case <-time.After(time.Minute): // a backstop: the bound is 200 ms
		t.Fatal("the fetch still waits on a token endpoint that never answers")
	}
}

package mcpauth

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"golang.org/x/sys/unix"
)

// ErrNeedsLogin: a server that needs a person's authorization has no
// usable token; `capbridge login NAME` gets one.
var ErrNeedsLogin = &authError{step: "no usable token: the server needs a login"}

// Saved is what the store keeps for one server after a login: the
// authorization server's endpoints, the client it registered as, and
// the tokens. The file holds secrets: it is mode 0600 in a 0700
// directory, and its content is never logged.
type Saved struct {
	Server             string `json:"server"`
	URL                string `json:"url"`
	Issuer             string `json:"issuer"`
	TokenEndpoint      string `json:"token_endpoint"`
	RevocationEndpoint string `json:"revocation_endpoint,omitempty"`
	ClientID           string `json:"client_id"`
	ClientSecret       string `json:"client_secret,omitempty"`
	// TokenAuth is how the client authenticates at the token endpoint:
	// none, client_secret_basic or client_secret_post.
	TokenAuth string `json:"token_auth,omitempty"`
	// Registered: the client registered itself (RFC 7591) at this
	// authorization server; a later login uses it again.
	Registered bool   `json:"registered,omitempty"`
	Resource   string `json:"resource"`
	// Scopes were asked for; Granted are those the token carries (the
	// token response's scope, else Scopes).
	Scopes       []string  `json:"scopes,omitempty"`
	Granted      []string  `json:"granted,omitempty"`
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// StepUp are the scopes a server asked for (403 insufficient_scope)
	// that the token lacks: the next login asks for them too. StepUps
	// counts the logins made so, since the last plain one.
	StepUp  []string `json:"step_up,omitempty"`
	StepUps int      `json:"step_ups,omitempty"`
}

// granted is the scopes the saved token carries.
func (sv *Saved) granted() []string {
	if sv.Granted != nil {
		return sv.Granted
	}
	return sv.Scopes
}

// Store is the directory of saved tokens, one file per server.
type Store struct{ Dir string }

// DefaultStore is $XDG_STATE_HOME/capbridge/oauth, else
// ~/.local/state/capbridge/oauth.
func DefaultStore() (Store, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return Store{Dir: filepath.Join(d, "capbridge", "oauth")}, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return Store{}, fail("the token store", fmt.Errorf("no XDG_STATE_HOME and no home directory: %w", err))
	}
	return Store{Dir: filepath.Join(home, ".local", "state", "capbridge", "oauth")}, nil
}

var storeName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)

func (s Store) path(server, ext string) (string, error) {
	if !storeName.MatchString(server) {
		return "", fail("the token store", fmt.Errorf("bad server name %q", server))
	}
	return filepath.Join(s.Dir, server+ext), nil
}

// Load returns the saved tokens of server; ErrNeedsLogin when there are
// none. The file must be one no one else could have written (private):
// its token endpoint is where the tokens go. It may be a symbolic link
// (a login mounted from a secret store), checked where it leads.
func (s Store) Load(server string) (*Saved, error) {
	p, err := s.path(server, ".json")
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNeedsLogin
	}
	if err != nil {
		return nil, fail("reading the token store", err)
	}
	defer f.Close()
	if err := private(f, p); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSaved+1))
	if err != nil {
		return nil, fail("reading the token store", err)
	}
	if len(b) > maxSaved {
		return nil, fail("the token store's file for "+server, errors.New("is larger than a saved login; run capbridge login again"))
	}
	var sv Saved
	if err := json.Unmarshal(b, &sv); err != nil || sv.AccessToken == "" {
		return nil, fail("the token store's file for "+server, errors.New("is not a saved login; run capbridge login again"))
	}
	return &sv, nil
}

// maxSaved bounds a saved login's file: a few KiB of endpoints and
// tokens.
const maxSaved = 1 << 20

// private checks that f, opened from p, is a regular file that no one
// but this user (or root, as a mounted secret's owner) could have
// written.
func private(f *os.File, p string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fail("reading the token store", err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fail("the token store", fmt.Errorf("%s is not a regular file; remove it and run capbridge login again", p))
	case int(st.Uid) != os.Geteuid() && st.Uid != 0:
		return fail("the token store", fmt.Errorf("%s belongs to uid %d, not this user; remove it and run capbridge login again", p, st.Uid))
	case st.Mode&0o022 != 0:
		return fail("the token store", fmt.Errorf("%s has mode %#o: others may change it; remove it and run capbridge login again", p, st.Mode&0o777))
	}
	return nil
}

// dir makes the store's directory, 0700, or checks the one there is.
func (s Store) dir() error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fail("the token store", err)
	}
	if err := os.Chmod(s.Dir, 0o700); err != nil {
		return fail("the token store", err)
	}
	return nil
}

// Save replaces server's saved tokens atomically: a file written beside
// it (0600), synced, renamed over it, in a directory made 0700.
func (s Store) Save(sv *Saved) error {
	p, err := s.path(sv.Server, ".json")
	if err != nil {
		return err
	}
	if err := s.dir(); err != nil {
		return err
	}
	b, err := json.Marshal(sv)
	if err != nil {
		return fail("the token store", err)
	}
	f, err := os.CreateTemp(s.Dir, "."+sv.Server+".*")
	if err != nil {
		return fail("the token store", err)
	}
	tmp := f.Name()
	_, werr := f.Write(b)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp, p)
	}
	if werr != nil {
		_ = os.Remove(tmp)
		return fail("writing the token store", werr)
	}
	// The rename is durable once the directory is: after a crash the file
	// must not come back with a refresh token the server has rotated.
	if d, err := os.Open(s.Dir); err == nil {
		werr = d.Sync()
		_ = d.Close()
	}
	if werr != nil {
		return fail("writing the token store", werr)
	}
	return nil
}

// Delete removes server's saved tokens; none saved is not an error.
func (s Store) Delete(server string) error {
	p, err := s.path(server, ".json")
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fail("the token store", err)
	}
	return nil
}

// A lock held by another process is waited for, polling, at most
// lockWait: a refresh takes one token request.
const (
	lockWait = 10 * time.Second
	lockPoll = 20 * time.Millisecond
)

// Lock holds server's lock file until the returned func is called, so
// that two capbridge processes never refresh one token at once (the
// second finds the first's new token when it gets the lock).
func (s Store) Lock(server string) (func(), error) {
	p, err := s.path(server, ".lock")
	if err != nil {
		return nil, err
	}
	if err := s.dir(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, fail("the token store's lock", fmt.Errorf("%s: %w (a symbolic link is not followed)", p, err))
	}
	if err := private(f, p); err != nil {
		_ = f.Close()
		return nil, err
	}
	deadline := time.Now().Add(lockWait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			_ = f.Close()
			return nil, fail("the token store's lock", fmt.Errorf("%s: %w (another capbridge holds it)", p, err))
		}
		time.Sleep(lockPoll)
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		_ = f.Close()
	}, nil
}

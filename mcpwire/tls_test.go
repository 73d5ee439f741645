package mcpwire

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/capbridge/capbridge/internal/testkit/leakcheck"
	"github.com/capbridge/capbridge/internal/testkit/mcptest"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "capbridge test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate for the loopback address (server) or
// a client, with its key, as a tls.Certificate and as PEM files in dir.
func (ca *testCA) issue(t *testing.T, dir, name string, client bool) (tls.Certificate, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	if client {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	cf, kf := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(cf, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kf, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair, cf, kf
}

// tlsFixture is a test CA written to a ca_file in dir, and a server
// certificate it issued.
func tlsFixture(t *testing.T, dir string) (ca *testCA, caFile string, serverCert tls.Certificate) {
	t.Helper()
	ca = newCA(t)
	caFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	serverCert, _, _ = ca.issue(t, dir, "server", false)
	return ca, caFile, serverCert
}

// TestRemoteTLS: a server whose certificate a private CA issued is
// trusted only with ca_file; one that requires a client certificate is
// reached only with it; HTTP/2 is what TLS negotiates.
func TestRemoteTLS(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	dir := t.TempDir()
	ca, caFile, serverCert := tlsFixture(t, dir)
	_, clientCert, clientKey := ca.issue(t, dir, "client", true)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)

	face := mcptest.NewHTTP(mcptest.Scenario{}, mcptest.HTTPOptions{SSE: true})
	var proto string
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto = r.Proto
		face.ServeHTTP(w, r)
	}))
	ts.EnableHTTP2 = true
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	ts.StartTLS()
	t.Cleanup(func() {
		face.Close()
		ts.Close()
	})
	url := ts.URL + "/mcp"

	hc, err := HTTPClient(HTTPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(context.Background(), Remote{URL: url, Client: hc}, Config{}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("an unknown CA: %v", err)
	}
	hc, err = HTTPClient(HTTPOptions{CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Dial(context.Background(), Remote{URL: url, Client: hc}, Config{}); err == nil {
		t.Fatal("no client certificate, and yet connected")
	}
	hc, err = HTTPClient(HTTPOptions{CAFile: caFile, CertFile: clientCert, KeyFile: clientKey})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, url, Remote{Client: hc}, Config{})
	echo(t, c, "over mutual TLS")
	closeHTTP(t, c)
	if proto != "HTTP/2.0" {
		t.Fatalf("protocol %q, want HTTP/2.0", proto)
	}

	if _, err := HTTPClient(HTTPOptions{CAFile: filepath.Join(dir, "absent.pem")}); err == nil || !strings.Contains(err.Error(), "ca_file") {
		t.Fatalf("a missing ca_file: %v", err)
	}
	if _, err := HTTPClient(HTTPOptions{CAFile: clientKey}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("a ca_file that is a key: %v", err)
	}
	// A FIFO no one writes is refused, not waited on (the boot that
	// builds the client would wait with it).
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, o := range []HTTPOptions{{CAFile: fifo}, {CertFile: fifo, KeyFile: clientKey}, {CertFile: clientCert, KeyFile: fifo}} {
		if _, err := HTTPClient(o); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("%+v: %v", o, err)
		}
	}
}

// TestRemoteRedirect: a redirect within the origin is followed (the body
// and headers carried along); one to another origin is refused, so no
// header reaches it.
func TestRemoteRedirect(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	face := mcptest.NewHTTP(mcptest.Scenario{}, mcptest.HTTPOptions{})
	mux := http.NewServeMux()
	mux.Handle("/mcp", face)
	mux.Handle("/old", http.RedirectHandler("/mcp", http.StatusPermanentRedirect))
	ts := httptest.NewServer(mux)
	t.Cleanup(func() {
		face.Close()
		ts.Close()
	})
	c := dial(t, ts.URL+"/old", Remote{Header: http.Header{"Authorization": {"Bearer tok"}}}, Config{})
	echo(t, c, "redirected")
	if face.LastHeaders("POST tools/call").Get("Authorization") != "Bearer tok" {
		t.Fatal("the header was not carried through a same-origin redirect")
	}
	closeHTTP(t, c)
}

// A response head beyond 1 MiB is refused over https (HTTP/2) as over
// plain http.
func TestRemoteTLSHeadBound(t *testing.T) {
	t.Cleanup(leakcheck.Check(t))
	_, caFile, serverCert := tlsFixture(t, t.TempDir())
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Huge", strings.Repeat("a", 2<<20))
		w.WriteHeader(http.StatusOK)
	}))
	ts.EnableHTTP2 = true
	ts.Config.MaxHeaderBytes = 4 << 20
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	hc, err := HTTPClient(HTTPOptions{CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(ts.URL + "/mcp")
	if err == nil {
		_ = resp.Body.Close()
		t.Fatalf("a 2 MiB head over %s was taken", resp.Proto)
	}
}

package endpoint_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"

	"github.com/vmipam/vmipam/controller/dryrun"
	"github.com/vmipam/vmipam/controller/dryrun/endpoint"
)

// serve starts a Server with opts (the API server it would ask is unreachable: only requests
// that need no review work) and returns a client that trusts it.
func serve(t *testing.T, opts endpoint.Options, policies policySource) (*endpoint.Server, *http.Client) {
	t.Helper()
	h := newHandler(t, true)
	opts.BindAddress = "127.0.0.1:0"
	srv, err := endpoint.New(&rest.Config{Host: "https://127.0.0.1:1"}, h.Reader, policies, h.Engine, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(srv.ServingCertPEM()) {
		t.Fatal("no certificate to trust")
	}
	return srv, &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	var resp *http.Response
	var err error
	for i := 0; i < 50; i++ { // Start serves asynchronously
		if resp, err = c.Get(url); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func TestServesTLSWithAGeneratedCertificateAndIsReadyOncePoliciesLoad(t *testing.T) {
	policies := policySource{loaded: make(chan struct{})}
	srv, c := serve(t, endpoint.Options{}, policies)
	base := "https://" + srv.Addr()
	if code, _ := get(t, c, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if code, body := get(t, c, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "policies") {
		t.Errorf("/readyz before the policies load: %d %s", code, body)
	}
	close(policies.loaded)
	if code, _ := get(t, c, base+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz: %d", code)
	}
	resp, err := c.Post(base+dryrun.Path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST without a token: %d, want 401", resp.StatusCode)
	}
}

func TestServesTheCertificateFromFiles(t *testing.T) {
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("dryrun.example", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	loaded := policySource{loaded: make(chan struct{})}
	close(loaded.loaded)
	srv, c := serve(t, endpoint.Options{CertFile: certFile, KeyFile: keyFile}, loaded)
	c.Transport.(*http.Transport).TLSClientConfig.ServerName = "dryrun.example"
	if code, _ := get(t, c, "https://"+srv.Addr()+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz over the file certificate: %d", code)
	}
}

func TestRefusesMissingCertificateFiles(t *testing.T) {
	h := newHandler(t, true)
	_, err := endpoint.New(&rest.Config{Host: "https://127.0.0.1:1"}, h.Reader, h.Policies, h.Engine,
		endpoint.Options{BindAddress: "127.0.0.1:0", CertFile: "/nonexistent/tls.crt", KeyFile: "/nonexistent/tls.key"})
	if err == nil {
		t.Error("New with missing certificate files: want an error")
	}
}

// syncLog collects the lines of a funcr logger; safe for the server's goroutines.
type syncLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *syncLog) add(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, prefix+" "+args)
}

func (l *syncLog) find(substr string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			return line
		}
	}
	return ""
}

func TestTLSHandshakeErrorsGoToTheLoggerAtV1(t *testing.T) {
	var logged syncLog
	loaded := policySource{loaded: make(chan struct{})}
	close(loaded.loaded)
	srv, _ := serve(t, endpoint.Options{Logger: funcr.New(logged.add, funcr.Options{Verbosity: 1})}, loaded)
	conn, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil { // plain HTTP on the TLS port
		t.Fatal(err)
	}
	_, _ = io.ReadAll(conn)
	conn.Close()
	var line string
	for i := 0; i < 100 && line == ""; i++ {
		time.Sleep(10 * time.Millisecond)
		line = logged.find("TLS handshake error")
	}
	if line == "" || !strings.Contains(line, `"level"=1`) {
		t.Errorf("log line %q, want the TLS handshake error logged at V(1)", line)
	}
}

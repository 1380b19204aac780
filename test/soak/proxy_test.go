package soak

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// faultRates are the chances, per request through the proxy, of each injected fault.
type faultRates struct {
	serverError float64 // 500 or 503, the request is not forwarded
	tooMany     float64 // 429 with Retry-After: 1
	latency     float64 // 20–250 ms before forwarding
	dropWatch   float64 // a watch is cut after 1–5 s
}

// calm are the rates between storms: rare faults, as a healthy but busy API server gives.
var calm = faultRates{serverError: 0.01, tooMany: 0.01, latency: 0.05, dropWatch: 0.2}

// storm are the rates of a fault storm.
var storm = faultRates{serverError: 0.2, tooMany: 0.15, latency: 0.3, dropWatch: 0.9}

// faultProxy is a reverse proxy in front of the API server that injects faults into the
// controllers' requests, and counts the writes it passes on (leases aside).
type faultProxy struct {
	proxy *httputil.ReverseProxy
	srv   *http.Server
	addr  string

	mu    sync.Mutex
	rng   *rand.Rand
	rates faultRates
	on    bool

	injected atomic.Int64 // faults injected
	writes   atomic.Int64 // writes forwarded, leases aside
	lastPath atomic.Value // string: the last write forwarded, for reports
}

// newFaultProxy listens on a local port and forwards to the API server of cfg with cfg's
// credentials; the controllers talk plain HTTP to it.
func newFaultProxy(cfg *rest.Config, seed uint64) (*faultProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &faultProxy{rng: rand.New(rand.NewPCG(seed, 0x5eed)), rates: calm, addr: ln.Addr().String()}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport:     transport,
		FlushInterval: -1,                         // watches stream
		ErrorLog:      log.New(io.Discard, "", 0), // cut watches are the point, not news
	}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is where clients reach the proxy.
func (p *faultProxy) URL() string { return "http://" + p.addr }

// set turns faults on or off and chooses their rates.
func (p *faultProxy) set(on bool, rates faultRates) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.on, p.rates = on, rates
}

// roll returns the fault to inject into one request ("" for none) and, for a watch to be cut,
// after how long; latency is returned apart, as it combines with the rest.
func (p *faultProxy) roll(watch bool) (fault string, delay, cut time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		return "", 0, 0
	}
	r := p.rates
	if p.rng.Float64() < r.latency {
		delay = time.Duration(20+p.rng.IntN(230)) * time.Millisecond
	}
	switch x := p.rng.Float64(); {
	case x < r.serverError:
		fault = []string{"500", "503"}[p.rng.IntN(2)]
	case x < r.serverError+r.tooMany:
		fault = "429"
	}
	if watch && fault == "" && p.rng.Float64() < r.dropWatch {
		cut = time.Duration(1000+p.rng.IntN(4000)) * time.Millisecond
	}
	return fault, delay, cut
}

// ServeHTTP forwards r, or answers it with an injected fault.
func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	watch := r.URL.Query().Get("watch") == "true"
	// Leader election: the lease and its LeaderElection events in the lease's namespace.
	lease := strings.Contains(r.URL.Path, "/leases") || strings.HasPrefix(r.URL.Path, "/api/v1/namespaces/"+leaseNamespace+"/events")
	fault, delay, cut := p.roll(watch)
	if lease { // losing the lease is a fault of its own (a kill), not of every request
		fault, cut = "", 0
	}
	if delay > 0 {
		p.injected.Add(1)
		time.Sleep(delay)
	}
	if fault != "" {
		p.injected.Add(1)
		writeStatus(w, fault)
		return
	}
	if cut > 0 {
		p.injected.Add(1)
		ctx, cancel := context.WithTimeout(r.Context(), cut)
		defer cancel()
		r = r.WithContext(ctx)
	}
	rec := &statusRecorder{ResponseWriter: w}
	p.proxy.ServeHTTP(rec, r)
	if r.Method != http.MethodGet && !lease && rec.code < 300 { // a write that changed something
		p.writes.Add(1)
		p.lastPath.Store(r.Method + " " + r.URL.Path)
	}
}

// statusRecorder remembers the status code of a response; Flush passes through, for watches.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the connection's writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// writeStatus answers with a Kubernetes Status of the fault's code.
func writeStatus(w http.ResponseWriter, fault string) {
	code, reason := http.StatusInternalServerError, "InternalError"
	switch fault {
	case "503":
		code, reason = http.StatusServiceUnavailable, "ServiceUnavailable"
	case "429":
		code, reason = http.StatusTooManyRequests, "TooManyRequests"
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
		"message": "injected by the soak's fault proxy", "reason": reason, "code": code})
}

// close stops the proxy.
func (p *faultProxy) close() { _ = p.srv.Close() }

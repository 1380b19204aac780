package install

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ports of one replica.
type ports struct{ webhook, api, metrics, health int }

// values are the chart values that set these ports.
func (p ports) values() map[string]any {
	return map[string]any{"webhook": p.webhook, "api": p.api, "metrics": p.metrics, "health": p.health}
}

// freePorts picks four free local ports: tests of other packages run beside this one.
func freePorts(t *testing.T) ports {
	t.Helper()
	var got []int
	for range 4 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		got = append(got, l.Addr().(*net.TCPAddr).Port)
	}
	return ports{webhook: got[0], api: got[1], metrics: got[2], health: got[3]}
}

// replica is one controller process, as one pod of the Deployment.
type replica struct {
	name    string
	cmd     *exec.Cmd
	log     string // path of its combined output
	certDir string // its "Secret volume"
	ports   ports
	done    chan struct{}
}

// startReplica runs the controller binary with the Deployment's container args, changing
// only what a pod has and a process here has not: the certificate volume's path, its own
// ports, and the ServiceAccount's kubeconfig instead of the in-cluster one.
func startReplica(t *testing.T, binary, dir, name string, args []string, p ports, kubeconfig string) *replica {
	t.Helper()
	r := &replica{name: name, log: filepath.Join(dir, name+".log"), certDir: filepath.Join(dir, name+"-certs"),
		ports: p, done: make(chan struct{})}
	if err := os.MkdirAll(r.certDir, 0o700); err != nil {
		t.Fatal(err)
	}
	override := map[string]string{
		"--webhook-port":              strconv.Itoa(p.webhook),
		"--secure-port":               strconv.Itoa(p.api),
		"--metrics-bind-address":      "127.0.0.1:" + strconv.Itoa(p.metrics),
		"--health-probe-bind-address": "127.0.0.1:" + strconv.Itoa(p.health),
	}
	var final []string
	for _, a := range args {
		flag, value, _ := strings.Cut(a, "=")
		if v, ok := override[flag]; ok {
			value = v
		}
		value = strings.ReplaceAll(value, "/certs", r.certDir) // the Secret volume's mountPath
		final = append(final, flag+"="+value)
	}
	final = append(final, "--kubeconfig="+kubeconfig)
	log, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.cmd = exec.Command(binary, final...)
	r.cmd.Stdout, r.cmd.Stderr = log, log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.cmd.Wait(); log.Close(); close(r.done) }()
	t.Cleanup(r.stop)
	return r
}

// ready reports whether the replica's readiness endpoint answers 200, as the kubelet's
// readiness probe would ask it; excluded checks are not asked.
func (r *replica) ready(exclude ...string) bool {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz?%s", r.ports.health, url.Values{"exclude": exclude}.Encode()))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// kill ends the process at once (SIGKILL: no lease release, as a node failure).
func (r *replica) kill() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

// stop asks the process to end (SIGTERM, as the kubelet does) and waits.
func (r *replica) stop() {
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		r.kill()
	}
}

// output is what the replica logged so far.
func (r *replica) output() string {
	data, _ := os.ReadFile(r.log)
	return string(data)
}

// mountSecret stands in for the kubelet's Secret volume: it copies every key of the Secret
// into each directory returned by dirs, as a file of that name, whenever the data changes,
// until ctx ends. Files are replaced by rename, so a reader never sees half a file.
func mountSecret(ctx context.Context, c client.Reader, key client.ObjectKey, dirs func() []string) {
	var mounted sync.Map // dir → the data last written there
	for ctx.Err() == nil {
		s := &corev1.Secret{}
		if err := c.Get(ctx, key, s); err == nil && len(s.Data) > 0 {
			for _, dir := range dirs() {
				if last, ok := mounted.Load(dir); ok && maps.EqualFunc(last.(map[string][]byte), s.Data, bytes.Equal) {
					continue
				}
				if writeFiles(dir, s.Data) == nil {
					mounted.Store(dir, s.Data)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func writeFiles(dir string, data map[string][]byte) error {
	for _, name := range slices.Sorted(maps.Keys(data)) {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, data[name], 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

package soak

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// replicaCount is how many controller replicas run, under leader election.
const replicaCount = 2

// leaseNamespace holds the replicas' leader lease.
const leaseNamespace = "default"

// buildController builds cmd/ipam-controller into dir.
func buildController(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "ipam-controller")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/vmipam/vmipam/cmd/ipam-controller").CombinedOutput(); err != nil {
		t.Fatalf("go build ipam-controller: %v\n%s", err, out)
	}
	return bin
}

// proxyKubeconfig writes a kubeconfig that points at the fault proxy (which adds the
// credentials) and returns its path.
func proxyKubeconfig(t *testing.T, dir, server string) string {
	t.Helper()
	path := filepath.Join(dir, "proxy.kubeconfig")
	data := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: proxy, cluster: {server: %q}}]
users: [{name: controller, user: {}}]
contexts: [{name: proxy, context: {cluster: proxy, user: controller}}]
current-context: proxy
`, server)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// replica is one running controller process.
type replica struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// replicaSet runs the controller replicas and restarts any that exits (a replica that loses
// its lease exits, as in a Deployment).
type replicaSet struct {
	bin, kubeconfig, dir string

	mu       sync.Mutex
	running  [replicaCount]*replica
	starts   [replicaCount]int
	stopping bool
	exits    int // exits that were not asked for (lost lease, crash)
}

// start starts replica i.
func (rs *replicaSet) start(i int) error {
	rs.starts[i]++
	log := filepath.Join(rs.dir, fmt.Sprintf("controller-%d.%d.log", i, rs.starts[i]))
	f, err := os.Create(log)
	if err != nil {
		return err
	}
	cmd := exec.Command(rs.bin, "--kubeconfig="+rs.kubeconfig, "--leader-elect=true", "--leader-elect-namespace="+leaseNamespace,
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--secure-port=0", "--webhook-port=0")
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	r := &replica{cmd: cmd, log: log, done: make(chan struct{})}
	rs.running[i] = r
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(r.done)
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if rs.running[i] == r && !rs.stopping { // not a stop we asked for: restart, as a Deployment would
			rs.exits++
			time.AfterFunc(time.Second, func() {
				rs.mu.Lock()
				defer rs.mu.Unlock()
				if rs.running[i] == r && !rs.stopping {
					_ = rs.start(i)
				}
			})
		}
	}()
	return nil
}

// startAll starts every replica.
func (rs *replicaSet) startAll() error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for i := range replicaCount {
		if err := rs.start(i); err != nil {
			return err
		}
	}
	return nil
}

// stopOne stops replica i with sig and waits until it has exited.
func (rs *replicaSet) stopOne(i int, sig os.Signal) {
	rs.mu.Lock()
	r := rs.running[i]
	rs.running[i] = nil
	rs.mu.Unlock()
	if r == nil {
		return
	}
	_ = r.cmd.Process.Signal(sig)
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// bounce stops replica i with sig and starts it again.
func (rs *replicaSet) bounce(i int, sig os.Signal) error {
	rs.stopOne(i, sig)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.start(i)
}

// leader returns the replica that last logged acquiring the lease, or -1.
func (rs *replicaSet) leader() int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for i, r := range rs.running {
		if r == nil {
			continue
		}
		data, err := os.ReadFile(r.log)
		if err == nil && strings.Contains(strings.ToLower(string(data)), "successfully acquired lease") {
			select {
			case <-r.done:
			default:
				return i
			}
		}
	}
	return -1
}

// stopAll stops every replica.
func (rs *replicaSet) stopAll() {
	rs.mu.Lock()
	rs.stopping = true
	rs.mu.Unlock()
	for i := range replicaCount {
		rs.stopOne(i, syscall.SIGTERM)
	}
}

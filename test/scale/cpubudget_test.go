package scale

import (
	"net/http"
	"runtime"
	"syscall"
	"time"
)

// cpuBudget is the CPU seconds every process of a run has used: the kube-apiserver, etcd, the
// controller and the suite's own process (the stand-ins, the suite's watch and its clients).
// Its difference over a phase is the phase's CPU work; on a machine of runtime.NumCPU() CPUs a
// phase that needs W CPU-seconds takes at least W/NumCPU seconds, however the work is ordered.
type cpuBudget struct{ APIServer, Etcd, Controller, Suite float64 }

// Total is every process's CPU seconds.
func (b cpuBudget) Total() float64 { return b.APIServer + b.Etcd + b.Controller + b.Suite }

// minus is b's CPU seconds since earlier.
func (b cpuBudget) minus(earlier cpuBudget) cpuBudget {
	return cpuBudget{b.APIServer - earlier.APIServer, b.Etcd - earlier.Etcd, b.Controller - earlier.Controller, b.Suite - earlier.Suite}
}

// cpuBound is the least time, in seconds, b's work takes on this machine's CPUs.
func (b cpuBudget) cpuBound() float64 { return b.Total() / float64(runtime.NumCPU()) }

// cpuBudget reads every process's CPU seconds now: the kube-apiserver's, etcd's and the
// controller's own process_cpu_seconds_total (the controller's 0 before it starts), and the
// suite process's user and system time (getrusage).
func (h *harness) cpuBudget() cpuBudget {
	b := cpuBudget{APIServer: h.apiServerCPU(), Etcd: h.etcdCPU(), Suite: ownCPU()}
	if h.controller != nil {
		b.Controller = h.controllerCPU()
	}
	return b
}

// etcdCPU is etcd's process_cpu_seconds_total, from the /metrics it serves on its client URL
// (plain HTTP in envtest); 0 when it cannot be read.
func (h *harness) etcdCPU() float64 {
	u := *h.env.Env.ControlPlane.Etcd.URL
	u.Path = "/metrics"
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(u.String())
	if err != nil {
		h.t.Logf("reading etcd's metrics: %v", err)
		return 0
	}
	defer resp.Body.Close()
	m, err := parseMetrics(resp.Body)
	if err != nil {
		h.t.Logf("parsing etcd's metrics: %v", err)
		return 0
	}
	return sum(m, "process_cpu_seconds_total", "", "")
}

// ownCPU is the suite process's user and system CPU seconds (getrusage(RUSAGE_SELF)).
func ownCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

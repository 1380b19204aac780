package scale

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
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

// cpuBudget reads every process's CPU seconds now, from the kernel's accounting
// (/proc/<pid>/stat for the kube-apiserver, etcd and the controller, getrusage for the suite's
// process): a read is instant and costs the processes nothing, where scraping the
// kube-apiserver's metrics costs it CPU and lands after a short window closes. The
// controller's is 0 before it starts.
func (h *harness) cpuBudget() cpuBudget {
	if h.apiServerPID == 0 {
		etcd := h.env.Env.ControlPlane.Etcd.URL.Host // in both command lines, this harness's own
		h.apiServerPID, h.etcdPID = childPID(h.t, "kube-apiserver", etcd), childPID(h.t, "etcd", etcd)
	}
	b := cpuBudget{APIServer: procCPU(h.apiServerPID), Etcd: procCPU(h.etcdPID), Suite: ownCPU()}
	if h.controller != nil && h.controller.Process != nil {
		b.Controller = procCPU(h.controller.Process.Pid)
	}
	return b
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on every
// Linux architecture Go supports (sysconf(_SC_CLK_TCK) needs cgo).
const clockTicks = 100

// procCPU is process pid's user and system CPU seconds from /proc/<pid>/stat; 0 when it
// cannot be read.
func procCPU(pid int) float64 {
	user, system := procTimes(pid)
	return user + system
}

// procTimes is process pid's user and system CPU seconds: utime and stime, fields 14 and 15 of
// /proc/<pid>/stat, in clockTicks; 0 when they cannot be read.
func procTimes(pid int) (user, system float64) {
	fields := procStat(pid) // field n of the file at n-2
	if len(fields) < 14 {
		return 0, 0
	}
	utime, err1 := strconv.ParseUint(fields[12], 10, 64)
	stime, err2 := strconv.ParseUint(fields[13], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	return float64(utime) / clockTicks, float64(stime) / clockTicks
}

// procStat is process pid's command (field 2 of /proc/<pid>/stat) and the fields after it:
// field n of the file at index n-2 (state 1, ppid 2, utime 12, stime 13); nil when it cannot
// be read.
func procStat(pid int) []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(data)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return nil
	}
	return append([]string{s[open+1 : end]}, strings.Fields(s[end+1:])...)
}

// childPID is findChild's PID; it fails t when there is none.
func childPID(t testing.TB, command, marker string) int {
	pid, err := findChild(command, marker)
	must(t, err)
	return pid
}

// findChild is the PID of the suite process's child (not a grandchild) running command with
// marker in its command line: envtest starts etcd and the kube-apiserver as children, and the
// marker, the etcd URL, tells this harness's from another's still stopping.
func findChild(command, marker string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st := procStat(pid)
		if len(st) < 3 || st[0] != command || st[2] != self {
			continue
		}
		if cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && strings.Contains(string(cmdline), marker) {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no child process %q with %q in its command line", command, marker)
}

// ownCPU is the suite process's user and system CPU seconds (getrusage(RUSAGE_SELF)).
func ownCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func TestProcTimesAgreeWithGetrusage(t *testing.T) {
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); { // user time
	}
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); { // system time
		_, _ = os.ReadFile("/proc/self/stat")
	}
	user, system := procTimes(os.Getpid())
	var ru syscall.Rusage
	must(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	ruUser, ruSystem := time.Duration(ru.Utime.Nano()).Seconds(), time.Duration(ru.Stime.Nano()).Seconds()
	// Two clock ticks of slack each; the loops above give each well over 50 ms.
	if user < 0.05 || user < ruUser-0.02 || user > ruUser+0.02 {
		t.Errorf("user time from /proc %.2f s, from getrusage %.2f s", user, ruUser)
	}
	if system < 0.05 || system < ruSystem-0.02 || system > ruSystem+0.02 {
		t.Errorf("system time from /proc %.2f s, from getrusage %.2f s", system, ruSystem)
	}
}

func TestFindChildTellsChildrenApartAndSkipsGrandchildren(t *testing.T) {
	start := func(name string, args ...string) int {
		cmd := exec.Command(name, args...)
		must(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	start("sleep", "5")
	six := start("sleep", "6")
	start("sh", "-c", "sleep 7; true") // sleep 7 is the shell's child, the suite's grandchild
	if got, err := findChild("sleep", "6"); err != nil || got != six {
		t.Errorf("findChild(sleep, 6) = %d, %v; want %d", got, err, six)
	}
	time.Sleep(100 * time.Millisecond) // let the shell start its sleep
	if got, err := findChild("sleep", "7"); err == nil {
		t.Errorf("findChild(sleep, 7) = %d, want none: that sleep is a grandchild", got)
	}
}

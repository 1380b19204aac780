package scale

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What a run keeps to explain itself. The measured figures are counts; when a count is off
// (a write above the minimum), these say which objects and why.

// keepFiles copies the harness's logs — the controller's, the stand-ins' and the API server's
// audit log — into a new directory under VMIPAM_SCALE_KEEP_DIR when that is set, once the
// control plane has stopped (the harness directory itself is a t.TempDir, removed after the
// test). Registered by newHarness.
func (h *harness) keepFiles() {
	root := os.Getenv("VMIPAM_SCALE_KEEP_DIR")
	if root == "" {
		return
	}
	dir := filepath.Join(root, fmt.Sprintf("%s-%s", strings.ReplaceAll(h.t.Name(), "/", "_"), time.Now().UTC().Format("20060102T150405.000")))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Errorf("keeping the run's logs: %v", err)
		return
	}
	for _, name := range []string{"controller.log", "standins.log", "audit.log"} {
		if err := copyFile(filepath.Join(h.dir, name), filepath.Join(dir, name)); err != nil && !os.IsNotExist(err) {
			h.t.Errorf("keeping %s: %v", name, err)
		}
	}
	h.t.Logf("logs of this run kept in %s", dir)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// repeatedWrites returns, for user's successful writes logged after mark, every object of the
// given "verb resource[/subresource]" kinds written more than once, as "kind namespace/name: n",
// sorted.
func (h *harness) repeatedWrites(user string, mark int64, kinds ...string) []string {
	counts := map[string]int{}
	for _, e := range h.auditEntries(mark) {
		k := e.Verb + " " + e.resource()
		if e.User.Username != user || !e.ok() || !slices.Contains(kinds, k) {
			continue
		}
		counts[k+" "+e.ObjectRef.Namespace+"/"+e.ObjectRef.Name]++
	}
	var out []string
	for obj, n := range counts {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s: %d", obj, n))
		}
	}
	slices.Sort(out)
	return out
}

// warnings returns the Warning events about the namespace's objects (the controller emits one
// per skipped interface, its reason the skip reason), as "regarding: reason: note", sorted.
func (h *harness) warnings(ctx context.Context, namespace string) []string {
	var list eventsv1.EventList
	if err := h.bench.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return []string{"listing events: " + err.Error()}
	}
	var out []string
	for _, e := range list.Items {
		if e.Type == corev1.EventTypeWarning {
			out = append(out, fmt.Sprintf("%s: %s: %s", e.Regarding.Name, e.Reason, e.Note))
		}
	}
	slices.Sort(out)
	return out
}

// evaluationTrouble reads the controller's counts of failed interface decisions
// (vmipam_decisions_total with reason PolicyError) and of evaluations abandoned past the
// evaluator's deadline.
func (h *harness) evaluationTrouble() (policyErrors, abandoned float64) {
	m, err := h.scrape()
	must(h.t, err)
	return sum(m, "vmipam_decisions_total", "reason", "PolicyError"), sum(m, "vmipam_policy_evaluations_abandoned_total", "", "")
}

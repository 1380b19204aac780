package golden

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/cmd/ipamctl/cli"
	"github.com/vmipam/vmipam/controller/dryrun/convert"
	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/evaluator/policytest"
	"github.com/vmipam/vmipam/policies/consumer"
	ipamv1 "github.com/vmipam/vmipam/policies/v1alpha1"
)

// repoRoot is the repository root, relative to this package.
const repoRoot = "../.."

// convergeTimeout bounds how long a case's world may take to settle.
const convergeTimeout = 60 * time.Second

func TestGoldenCasesDecideAlikeEverywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a control plane (envtest)")
	}
	h := startHarness(t)
	suites, err := filepath.Glob("testdata/*/suite.yaml")
	if err != nil || len(suites) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	for _, suite := range suites {
		dir := filepath.Dir(suite)
		t.Run(filepath.Base(dir), func(t *testing.T) { h.runCase(t, dir) })
	}
}

// runCase builds the case's world, lets it converge and compares the four answers.
func (h *harness) runCase(t *testing.T, dir string) {
	ctx := t.Context()
	ns := "golden-" + filepath.Base(dir)
	h.setUp(t, ctx, dir, ns)
	vm := h.subject(t, ctx, dir, ns)

	expected, inputs := evaluatorDecisions(t, ctx, h, dir)
	live, world := h.settled(t, ctx, ns, vm, expected, inputs)
	offline := h.ipamctl(t, ctx, dir, vm, world)

	t.Run("the dry-run API and ipamctl decided from the suite's input", func(t *testing.T) {
		for i, want := range inputs {
			for _, side := range []struct {
				name string
				res  *dryrunv1.EvaluationStatus
			}{{"dry-run API", live}, {"ipamctl", offline}} {
				got := side.res.Interfaces[i].Decision.Trace.Input
				if got == nil {
					t.Errorf("interface %d: the %s's trace has no input", i, side.name)
					continue
				}
				if g, w := mustJSON(t, canonical(*got)), mustJSON(t, canonical(want)); !bytes.Equal(g, w) {
					t.Errorf("interface %d: the %s's input\n%s\nthe suite's\n%s", i, side.name, g, w)
				}
			}
		}
	})

	t.Run("the evaluator, the dry-run API and ipamctl decide alike", func(t *testing.T) {
		for i := range expected {
			if got := verdictOf(live.Interfaces[i].Decision); got != expected[i] {
				t.Errorf("interface %d: dry-run API %+v, evaluator %+v", i, got, expected[i])
			}
			if got := verdictOf(offline.Interfaces[i].Decision); got != expected[i] {
				t.Errorf("interface %d: ipamctl %+v, evaluator %+v", i, got, expected[i])
			}
		}
	})
	t.Run("the dry-run API and ipamctl answer byte for byte alike", func(t *testing.T) {
		for _, part := range []struct {
			name          string
			online, offln any
		}{{"interfaces", live.Interfaces, offline.Interfaces}, {"actions", live.Actions, offline.Actions},
			{"applied", live.Applied, offline.Applied}} {
			a, b := mustJSON(t, part.online), mustJSON(t, part.offln)
			if !bytes.Equal(a, b) {
				t.Errorf("%s differ:\ndry-run API %s\nipamctl     %s", part.name, a, b)
			}
		}
	})
	t.Run("the reconcile wrote what the evaluator decided", func(t *testing.T) {
		h.checkReconcile(t, ctx, ns, vm, expected)
	})
}

// verdict is what a decision says, with its provenance, without its trace and cost (which
// depend on every byte of the input; the inputs are compared apart, canonical).
type verdict struct {
	Allocation            string
	Skip, Hotplug         bool
	Reason                string
	Message, Policy, Rule string
	Provenance            dryrunv1.Provenance
}

// verdictOf is the verdict of a decision as the dry-run API serves it; the evaluator's own
// decisions are compared through the same conversion (convert.Decision).
func verdictOf(d dryrunv1.Decision) verdict {
	return verdict{Allocation: d.Allocation, Skip: d.Skip, Hotplug: d.Hotplug, Reason: d.Reason, Message: d.Message,
		Policy: d.Policy, Rule: d.Rule, Provenance: d.Provenance}
}

// canonical is in without what a hand-written suite cannot know or need not repeat: the VM's
// UID, creation time and annotations (the controller writes networks-spec there), the owner's
// UID, an interface spec that only repeats the interface's fields; empty maps and lists as
// absent.
func canonical(in dryrunv1.Input) dryrunv1.Input {
	in.VM.UID, in.VM.CreationTimestamp, in.VM.Annotations, in.IPAddress.Owner.UID = "", "", nil, ""
	derived := dryrunv1.InputInterfaceSpec{ID: in.Interface.ID, Type: in.Interface.Type, Name: in.Interface.Name,
		IPAddressName: in.Interface.IPAddressName}
	if in.Interface.Spec == derived {
		in.Interface.Spec = dryrunv1.InputInterfaceSpec{}
	}
	for _, m := range []*map[string]string{&in.VM.Labels, &in.Network.Labels, &in.Namespace.Labels} {
		if len(*m) == 0 {
			*m = nil
		}
	}
	if len(in.Holders.VMs) == 0 {
		in.Holders.VMs = nil
	}
	return in
}

// evaluatorDecisions runs the case's suite through the evaluator: every expectation must
// hold; the decisions are what the other paths must match, and the inputs what they must
// have decided from, both as the dry-run API serves them (package convert).
func evaluatorDecisions(t *testing.T, ctx context.Context, h *harness, dir string) ([]verdict, []dryrunv1.Input) {
	t.Helper()
	suite, err := policytest.Load(os.DirFS(repoRoot), filepath.ToSlash(filepath.Join("test", "golden", dir, "suite.yaml")), nil)
	if err != nil {
		t.Fatal(err)
	}
	results, err := policytest.Run(ctx, h.compiler, suite)
	if err != nil {
		t.Fatal(err)
	}
	out, inputs := make([]verdict, len(results)), make([]dryrunv1.Input, len(results))
	for i, r := range results {
		if !r.Passed() {
			t.Errorf("evaluator: %s", r)
		}
		out[i] = verdictOf(convert.Decision(r.Decision))
		in, err := suite.CaseInput(i)
		if err != nil {
			t.Fatal(err)
		}
		inputs[i] = *convert.Input(&in)
	}
	return out, inputs
}

// settled returns the endpoint's answer for the converged VM and the world it was given for:
// the namespace's objects and the case's cluster-scoped ones, unchanged (resourceVersion for
// resourceVersion) from a second before the question until after the answer, so that the
// cache the endpoint reads had caught up with them. (The stand-ins may still write once the
// controller has nothing left to do, e.g. MAC addresses into the VM status.)
func (h *harness) settled(t *testing.T, ctx context.Context, ns, vm string, expected []verdict, inputs []dryrunv1.Input) (*dryrunv1.EvaluationStatus, []client.Object) {
	t.Helper()
	deadline := time.Now().Add(convergeTimeout)
	for {
		before := h.world(t, ctx, ns)
		time.Sleep(time.Second)
		res := h.converged(t, ctx, ns, vm, expected, inputs)
		after := h.world(t, ctx, ns)
		if versions(before) == versions(after) {
			return res, after
		}
		if time.Now().After(deadline) {
			t.Fatalf("the world of %s does not settle", ns)
		}
	}
}

// versions fingerprints objects by kind, name and resourceVersion.
func versions(objs []client.Object) string {
	var b strings.Builder
	for _, o := range objs {
		fmt.Fprintf(&b, "%T/%s/%s@%s;", o, o.GetNamespace(), o.GetName(), o.GetResourceVersion())
	}
	return b.String()
}

// converged asks the endpoint about the live VM until the controller has nothing left to do
// and the endpoint's decisions and inputs are the evaluator's, and returns that answer. The
// inputs too: SDN's stand-in may still be working through an IPAddress (Pending with
// NetworkNotFound, retried periodically, while the ClusterNetwork reaches its cache) when a
// decision that does not read it — IPAddressInUse — already matches, and a second of no
// writes did not tell that apart from the end.
func (h *harness) converged(t *testing.T, ctx context.Context, ns, vm string, expected []verdict, inputs []dryrunv1.Input) *dryrunv1.EvaluationStatus {
	t.Helper()
	var res *dryrunv1.EvaluationStatus
	var why string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, convergeTimeout, true, func(ctx context.Context) (bool, error) {
		live := &vmv1.VirtualMachine{}
		if err := h.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: vm}, live); err != nil {
			return false, err
		}
		var err error
		if res, err = h.ask(ctx, live); err != nil {
			return false, err
		}
		why = pending(res, expected, inputs)
		return why == "", nil
	})
	if err != nil {
		t.Fatalf("%s/%s did not converge to the evaluator's decisions: %v; last: %s", ns, vm, err, why)
	}
	return res
}

// pending says what the controller still has to do, or how the decisions or their inputs
// differ, or "".
func pending(res *dryrunv1.EvaluationStatus, expected []verdict, inputs []dryrunv1.Input) string {
	a := res.Actions
	switch {
	case len(a.CreateIPAddresses)+len(a.DeleteIPAddresses) > 0 || a.RecordChanged || a.Deferred:
		return fmt.Sprintf("writes pending: %s", mustJSONString(a))
	case len(res.Interfaces) != len(expected):
		return fmt.Sprintf("%d interfaces, want %d", len(res.Interfaces), len(expected))
	}
	for i := range expected {
		if got := verdictOf(res.Interfaces[i].Decision); got != expected[i] {
			return fmt.Sprintf("interface %d: %+v, want %+v", i, got, expected[i])
		}
	}
	for i, want := range inputs {
		got := res.Interfaces[i].Decision.Trace.Input
		if got == nil {
			return fmt.Sprintf("interface %d: the trace has no input", i)
		}
		g, _ := json.Marshal(canonical(*got))
		w, _ := json.Marshal(canonical(want))
		if !bytes.Equal(g, w) {
			return fmt.Sprintf("interface %d: input %s, want the suite's %s", i, g, w)
		}
	}
	return ""
}

// checkReconcile reads back what the reconciles wrote and the virtualization controller
// applied: attached interfaces in the record with the decided allocation and on every launcher
// pod, skipped ones not on the pods and in NetworkReady with the decided reason and message.
func (h *harness) checkReconcile(t *testing.T, ctx context.Context, ns, name string, expected []verdict) {
	vm := &vmv1.VirtualMachine{}
	if err := h.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
		t.Fatal(err)
	}
	rec := &ipamv1.VirtualMachineIPAM{}
	if err := h.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rec); err != nil {
		t.Fatal(err)
	}
	pods := h.launcherPods(t, ctx, ns, name)
	items := problemItems(meta.FindStatusCondition(vm.Status.Conditions, consumer.ConditionNetworkReady))
	i := 0
	for _, spec := range vm.Spec.Networks {
		if spec.Type == vmv1.NetworkTypeMain {
			continue
		}
		key := string(spec.Type) + "/" + spec.Name
		want, d := expected[i], rec.Spec.Interfaces[i]
		i++
		switch {
		case d.Attach == want.Skip:
			t.Errorf("%s: the record attaches %v, but the decision skips: %v", key, d.Attach, want.Skip)
		case d.Attach && string(d.Allocation) != string(want.Allocation):
			t.Errorf("%s: the record attaches it as %s, decided %s", key, d.Allocation, want.Allocation)
		case !d.Attach && items[key] != fmt.Sprintf("%s: %s", want.Reason, want.Message):
			t.Errorf("%s: NetworkReady says %q, decided %s: %s", key, items[key], want.Reason, want.Message)
		}
		for _, pod := range pods {
			entry, carried := parseSpec(t, pod.Annotations[sdnv1.AnnotationNetworksSpec])[key]
			if carried != d.Attach || carried && allocationOf(entry, spec) != want.Allocation {
				t.Errorf("%s: launcher pod %s carries %+v (%v), the record attaches %v as %s", key, pod.Name, entry, carried, d.Attach, d.Allocation)
			}
		}
	}
}

// allocationOf reads the allocation an attached networks-spec entry applies.
func allocationOf(e sdnv1.NetworksSpecEntry, spec vmv1.NetworksSpec) string {
	switch {
	case len(e.IPAddressNames) == 0:
		return string(evaluator.AllocationNone)
	case spec.IPAddressName != "" && e.IPAddressNames[0] == spec.IPAddressName:
		return string(evaluator.AllocationStatic)
	}
	return string(evaluator.AllocationAuto)
}

func parseSpec(t *testing.T, annotation string) map[string]sdnv1.NetworksSpecEntry {
	t.Helper()
	out := map[string]sdnv1.NetworksSpecEntry{}
	entries, err := sdnv1.ParseNetworksSpec(annotation)
	if err != nil {
		t.Fatalf("networks-spec %q: %v", annotation, err)
	}
	for _, e := range entries {
		out[e.Type+"/"+e.Name] = e
	}
	return out
}

// problemItems splits a NetworkReady=False message into "Reason: message" by interface key.
func problemItems(c *metav1.Condition) map[string]string {
	out := map[string]string{}
	if c == nil || c.Status == metav1.ConditionTrue {
		return out
	}
	for _, item := range strings.Split(c.Message, "; ") {
		if key, rest, ok := strings.Cut(item, ": "); ok {
			out[key] = rest
		}
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func mustJSONString(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}

// ipamctl writes the VM and its world into files and runs `ipamctl evaluate` on them
// in-process, with the same policies as installed.
func (h *harness) ipamctl(t *testing.T, ctx context.Context, dir, vm string, world []client.Object) *dryrunv1.EvaluationStatus {
	t.Helper()
	tmp := t.TempDir()
	vmFile, worldFile := filepath.Join(tmp, "vm.yaml"), filepath.Join(tmp, "world.yaml")
	for _, o := range world {
		if _, ok := o.(*vmv1.VirtualMachine); ok && o.GetName() == vm {
			h.writeManifests(t, vmFile, o)
		}
	}
	h.writeManifests(t, worldFile, world...)
	args := []string{"evaluate", "-f", vmFile, "-O", worldFile, "-p", filepath.Join(repoRoot, "policies", "default.yaml"), "-o", "json"}
	if _, err := os.Stat(filepath.Join(dir, "policy.yaml")); err == nil {
		args = append(args, "-p", filepath.Join(dir, "policy.yaml"))
	}
	var out, errOut bytes.Buffer
	if code := cli.Main(ctx, "ipamctl", args, cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}); code != 0 {
		t.Fatalf("ipamctl %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
	}
	ev := &dryrunv1.Evaluation{}
	if err := json.Unmarshal(out.Bytes(), ev); err != nil {
		t.Fatalf("ipamctl output: %v\n%s", err, out.String())
	}
	return &ev.Status
}

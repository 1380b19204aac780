package vm

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

func allocatedIP(name, addr string) *sdnv1.IPAddress {
	ip := &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: name}}
	ip.Status.Address, ip.Status.Phase = addr, sdnv1.IPAddressPhaseAllocated
	ip.Status.Conditions = []metav1.Condition{{Type: sdnv1.ConditionAllocated, Status: metav1.ConditionTrue}}
	return ip
}

// statusScope is a VM with Main, ClusterNetwork x (Auto, attached) and Network x (skipped).
func statusScope() *scope {
	vm := &vmv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "v", Generation: 7}}
	vm.Spec.Networks = []vmv1.NetworksSpec{{Type: "Main"}, {Type: "ClusterNetwork", Name: "x"}, {Type: "Network", Name: "x"}}
	vm.Status.Networks = []vmv1.NetworksStatus{
		{Type: "Main", MACAddress: "02:00:00:00:00:01", IPAddress: "10.244.0.5"},
		{Type: "Network", Name: "x", MACAddress: "02:00:00:00:00:03", IPAddress: "stale"},
		{Type: "ClusterNetwork", Name: "gone", IPAddress: "10.0.0.9"},
	}
	vm.Status.Conditions = []metav1.Condition{{Type: "AgentReady", Status: "True", Reason: "AgentReady"}}
	auto := allocatedIP("v-cn-x", "10.0.0.7")
	return &scope{vm: vm, ipAddresses: map[string]*sdnv1.IPAddress{auto.Name: auto}, interfaces: []*iface{
		{index: 1, spec: vm.Spec.Networks[1], key: "ClusterNetwork/x", dupOf: -1,
			decision: evaluator.Decision{Allocation: evaluator.AllocationAuto}, auto: auto, autoName: auto.Name,
			attached: &sdnv1.NetworksSpecEntry{Type: "ClusterNetwork", Name: "x", IPAddressNames: []string{auto.Name}}},
		{index: 2, spec: vm.Spec.Networks[2], key: "Network/x", dupOf: -1,
			decision: evaluator.Decision{Allocation: evaluator.AllocationStatic, Skip: true},
			problem:  &problem{"IPAddressNotFound", "IPAddress s does not exist"}},
	}}
}

func TestStatusNetworksHaveOneEntryPerSpecEntryKeyedByTypeAndName(t *testing.T) {
	st := desiredStatus(statusScope())
	want := []vmv1.NetworksStatus{
		{Type: "Main", MACAddress: "02:00:00:00:00:01", IPAddress: "10.244.0.5"},
		{Type: "ClusterNetwork", Name: "x", IPAddress: "10.0.0.7"},
		{Type: "Network", Name: "x", MACAddress: "02:00:00:00:00:03"},
	}
	if !reflect.DeepEqual(st.Networks, want) {
		t.Errorf("networks = %+v\nwant       %+v", st.Networks, want)
	}
}

func TestNetworkReadyListsEachSkippedInterfaceAndKeepsOtherConditions(t *testing.T) {
	st := desiredStatus(statusScope())
	c := meta.FindStatusCondition(st.Conditions, ConditionNetworkReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonNetworkNotReady || c.ObservedGeneration != 7 {
		t.Fatalf("NetworkReady = %+v", c)
	}
	if c.Message != "Network/x: IPAddressNotFound: IPAddress s does not exist" {
		t.Errorf("message = %q", c.Message)
	}
	if meta.FindStatusCondition(st.Conditions, "AgentReady") == nil {
		t.Error("another writer's condition was dropped")
	}
}

func TestAwaitingRestartIsRemovedOnlyWhenItIsOurs(t *testing.T) {
	s := statusScope()
	s.vm.Status.Conditions = append(s.vm.Status.Conditions, metav1.Condition{Type: ConditionAwaitingRestart,
		Status: "True", Reason: "VirtualMachineClassChanged"})
	if meta.FindStatusCondition(desiredStatus(s).Conditions, ConditionAwaitingRestart) == nil {
		t.Error("the virtualization controller's restart condition was removed")
	}
	s.vm.Status.Conditions[1].Reason = ReasonChangesPendingRestart
	if meta.FindStatusCondition(desiredStatus(s).Conditions, ConditionAwaitingRestart) != nil {
		t.Error("our restart condition stayed although nothing is pending")
	}
	s.pending = []string{"ClusterNetwork/x"}
	c := meta.FindStatusCondition(desiredStatus(s).Conditions, ConditionAwaitingRestart)
	if c == nil || !strings.HasSuffix(c.Message, ": ClusterNetwork/x") {
		t.Errorf("pending interfaces not listed: %+v", c)
	}
}

// With more interfaces not ready than fit, each item at minItemLength, the message is cut at
// the CRD's limit.
func TestNetworkReadyMessageIsCappedAtTheCRDLimit(t *testing.T) {
	s := statusScope()
	for i := range maxConditionMessage / minItemLength {
		s.interfaces = append(s.interfaces, &iface{key: fmt.Sprintf("Network/n%d", i), dupOf: -1,
			problem: &problem{"Busy", strings.Repeat("m", 2*maxConditionMessage)}})
	}
	c := meta.FindStatusCondition(desiredStatus(s).Conditions, ConditionNetworkReady)
	if len(c.Message) != maxConditionMessage {
		t.Errorf("message length %d, want %d", len(c.Message), maxConditionMessage)
	}
}

// TestNetworkReadyMessageIsCutOnACharacterBoundary: a cut inside a multi-byte character would
// come back from the API server as U+FFFD, so the status would differ on every reconcile and be
// written again and again.
func TestNetworkReadyMessageIsCutOnACharacterBoundary(t *testing.T) {
	s := statusScope()
	s.interfaces[1].problem.message = strings.Repeat("é", maxConditionMessage) // 2 bytes each
	c := meta.FindStatusCondition(desiredStatus(s).Conditions, ConditionNetworkReady)
	if !utf8.ValidString(c.Message) || len(c.Message) > maxConditionMessage || !strings.HasSuffix(c.Message, "é...") {
		t.Errorf("message (%d bytes) ends in %q, want valid UTF-8 of at most %d bytes ending in é...",
			len(c.Message), c.Message[len(c.Message)-8:], maxConditionMessage)
	}
}

func TestEventNotesFitTheEventsAPI(t *testing.T) {
	rec := &recordingRecorder{}
	r := &Reconciler{Recorder: rec}
	r.event(statusScope().vm, nil, "Warning", "InterfaceSkipped", "Skip", "interface %s: %s", "corp", strings.Repeat("ü", 2000))
	if len(rec.notes) != 1 || len(rec.notes[0]) > maxEventNote || !utf8.ValidString(rec.notes[0]) {
		t.Errorf("notes = %d, first of %d bytes; want one valid note of at most %d bytes", len(rec.notes), len(rec.notes[0]), maxEventNote)
	}
}

// recordingRecorder keeps the notes of the events it is given.
type recordingRecorder struct{ notes []string }

func (r *recordingRecorder) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(note, args...))
}

// TestStatusShowsTheAddressOfTheAttachedNIC: status describes the NIC the guest has. An
// interface that a transient problem (a policy error, a network flap) or a change held back
// until restart leaves with an older entry than the spec asks for shows the address of the
// IPAddress that entry carries; an interface that is not attached shows none.
func TestStatusShowsTheAddressOfTheAttachedNIC(t *testing.T) {
	s := statusScope()
	s.ipAddresses["ip-a"] = allocatedIP("ip-a", "10.0.0.31")
	s.ipAddresses["ip-b"] = allocatedIP("ip-b", "10.0.0.32")
	it := s.interfaces[0]
	it.spec.IPAddressName = "ip-b"
	it.static = s.ipAddresses["ip-b"]
	it.decision = evaluator.Decision{Allocation: evaluator.AllocationStatic, Skip: true, Reason: evaluator.ReasonNetworkNotReady}
	it.problem = &problem{string(evaluator.ReasonNetworkNotReady), "not ready"}
	it.attached = &sdnv1.NetworksSpecEntry{Type: "ClusterNetwork", Name: "x", IPAddressNames: []string{"ip-a"}}
	if got := address(s, it); got != "10.0.0.31" {
		t.Errorf("address of a kept interface = %q, want ip-a's 10.0.0.31 (the spec's ip-b is not attached)", got)
	}
	it.attached = nil
	if got := address(s, it); got != "" {
		t.Errorf("address of an interface that is not attached = %q", got)
	}
}

// TestFreshPendingWaitsLongerForSDNsFirstAnswer: while SDN has not answered an IPAddress at
// all, networks-spec and status wait up to UnansweredGrace; once it answered Pending, only
// FreshPendingGrace.
func TestFreshPendingWaitsLongerForSDNsFirstAnswer(t *testing.T) {
	s := statusScope()
	s.interfaces = s.interfaces[:1]
	it := s.interfaces[0]
	it.auto = &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "v-cn-x", CreationTimestamp: metav1.NewTime(time.Unix(1000, 0))}}
	it.autoName = it.auto.Name
	it.problem = &problem{string(evaluator.ReasonIPAddressPending), "waiting"}
	s.now = time.Unix(1010, 0) // 10 s after creation
	if _, deferred := freshPending(s, &Plan{}); !deferred {
		t.Error("an IPAddress SDN has not answered for 10 s should still defer the writes")
	}
	it.auto.Status.Phase = sdnv1.IPAddressPhasePending
	if _, deferred := freshPending(s, &Plan{}); deferred {
		t.Error("an IPAddress SDN answered Pending 10 s ago should be reported")
	}
	s.now = time.Unix(1031, 0)
	it.auto.Status.Phase = ""
	if _, deferred := freshPending(s, &Plan{}); deferred {
		t.Error("past UnansweredGrace the pending state should be reported")
	}
}

// TestFreshPendingWaitsForSDNsFirstAnswerOnANewStaticIPAddress: a static IPAddress a user has
// just created (to hot-plug the interface) and SDN has not answered yet holds networks-spec
// and status for FreshPendingGrace, as a new Auto IPAddress does — the reconcile of SDN's
// answer writes the final state once —; one SDN answered, or one past the grace, is reported.
func TestFreshPendingWaitsForSDNsFirstAnswerOnANewStaticIPAddress(t *testing.T) {
	s := statusScope()
	it := s.interfaces[1]
	it.static = &sdnv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "s", CreationTimestamp: metav1.NewTime(time.Unix(1000, 0))}}
	it.problem = &problem{string(evaluator.ReasonIPAddressNotAllocated), "IPAddress s is not allocated yet"}
	s.interfaces = s.interfaces[1:]
	s.now = time.Unix(1001, 0)
	if left, deferred := freshPending(s, &Plan{}); !deferred || left != FreshPendingGrace-time.Second {
		t.Errorf("a static IPAddress SDN has not answered for 1 s: deferred %v for %s, want %s", deferred, left, FreshPendingGrace-time.Second)
	}
	// SDN documents no reason for refusing a static address: any reason is an answer.
	it.static.Status.Conditions = []metav1.Condition{{Type: "Allocated", Status: "False", Reason: "AnyReasonSDNGives"}}
	if _, deferred := freshPending(s, &Plan{}); deferred {
		t.Error("a static IPAddress SDN answered (not allocated, with a reason) should be reported")
	}
	it.static.Status.Conditions = nil
	s.now = time.Unix(1000, 0).Add(FreshPendingGrace)
	if _, deferred := freshPending(s, &Plan{}); deferred {
		t.Error("past FreshPendingGrace an unanswered static IPAddress should be reported")
	}
	s.now = time.Unix(1001, 0)
	it.problem = &problem{string(evaluator.ReasonIPAddressNotFound), "IPAddress s does not exist"}
	if _, deferred := freshPending(s, &Plan{}); deferred {
		t.Error("another problem of the static interface should be reported")
	}
}

// TestSkipWarningsFollowASuccessfulStatusWrite: a Warning announces a new NetworkReady item
// once the status carrying it is written; a status write that loses a conflict (and is retried)
// announces nothing, so retries do not repeat events.
func TestSkipWarningsFollowASuccessfulStatusWrite(t *testing.T) {
	s := statusScope()
	s.vm.Namespace, s.vm.ResourceVersion = "ns", "5"
	p := &Plan{Status: desiredStatus(s), StatusChanged: true, Interfaces: results(s)}
	conflict := true
	c := fake.NewClientBuilder().WithScheme(runtimeScheme(t)).WithObjects(s.vm.DeepCopy()).WithStatusSubresource(s.vm).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
				if conflict {
					return apierrors.NewConflict(vmv1.GroupVersion.WithResource("virtualmachines").GroupResource(), obj.GetName(), errors.New("stale"))
				}
				return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			},
		}).Build()
	rec := &recordingRecorder{}
	r := &Reconciler{Client: c, APIReader: c, Recorder: rec}
	if err := r.writeStatus(context.Background(), s, nil, p); !apierrors.IsConflict(err) || len(rec.notes) != 0 {
		t.Fatalf("conflicting write: error %v, %d events; want the conflict and no event", err, len(rec.notes))
	}
	conflict = false
	if err := r.writeStatus(context.Background(), s, nil, p); err != nil || len(rec.notes) != 1 {
		t.Errorf("successful write: error %v, events %q; want one Warning for Network/x", err, rec.notes)
	}
}

// Every interface's item appears in NetworkReady, each within maxItemLength, however long the
// text before it: a PolicyError of CEL's timestamp() quotes the 200 KB annotation it failed on.
// Before, the first item took the whole 32,768 bytes and the second interface's item was cut
// off (atk15 finding 4). Class: a text built from unbounded input that lands in the condition
// or an event.
func TestEveryInterfacesItemAppearsWhateverTheOthersSay(t *testing.T) {
	set := compiledSetWith(t, evaluator.Limits{}, &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "ttl"},
		Spec: v1alpha1.ClusterIPAMPolicySpec{SkipRules: []v1alpha1.SkipRule{
			{Name: "ttl", Reason: "TTLExpired", Expression: "interface.name == 'n0' && " +
				"timestamp(vm.annotations[?'expires'].orValue('2100-01-01T00:00:00Z')) < timestamp('2026-01-01T00:00:00Z')"},
			{Name: "busy", Reason: "Busy", Message: "n1 is busy", Expression: "interface.name == 'n1'"}}}})
	s := manyInterfaces(set, 2)
	s.vm.Annotations = map[string]string{"expires": "2020-01-01T00:00:00Z" + strings.Repeat("0", 200_000)}
	if err := decide(context.Background(), s, evaluator.Options{}, errVMBudget); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		c := meta.FindStatusCondition(desiredStatus(s).Conditions, ConditionNetworkReady)
		items := strings.Split(c.Message, "; ")
		if len(items) != 2 || !strings.HasPrefix(items[0], "ClusterNetwork/n0: ") ||
			items[1] != "ClusterNetwork/n1: Busy: n1 is busy" {
			t.Fatalf("%s: NetworkReady (%d bytes) = %.200q…, want the items of n0 and n1", what, len(c.Message), c.Message)
		}
		for _, item := range items {
			if len(item) > maxItemLength {
				t.Errorf("%s: item of %d bytes, want at most %d", what, len(item), maxItemLength)
			}
		}
		rec := &recordingRecorder{}
		(&Reconciler{Recorder: rec}).announceSkips(s, &Plan{Interfaces: results(s)})
		if len(rec.notes) != 2 || rec.notes[0] != items[0] || rec.notes[1] != items[1] {
			t.Errorf("%s: events %.200q, want the two items", what, rec.notes)
		}
	}
	if s.interfaces[0].problem == nil || s.interfaces[0].problem.reason != string(evaluator.ReasonPolicyError) {
		t.Fatalf("n0: %+v, want a PolicyError", s.interfaces[0].problem)
	}
	check("a PolicyError quoting the value")
	// A text no evaluator bound applies to — a controller text, a stored message.
	s.interfaces[0].problem.message = strings.Repeat("ü", 200_000)
	check("a 400 KB message")
}

// A VM owner cannot forge NetworkReady items, nor break its line, through an interface's name:
// the VirtualMachine CRD accepts any spec.networks[].name (minLength 1 only), and the name is
// the item's key. Before, the name "corp: Attached; ClusterNetwork/db: NetworkNotFound: ok\n
// line2\u202e" made the condition read as if ClusterNetwork/corp were attached, with a line
// break and a bidi override in it (atk15b finding 2). Class: user-controlled text other than a
// message that lands in a condition or an event — every name is shown through InterfaceLabel,
// the same in NetworkReady, AwaitingRestartToApplyConfiguration and the events.
func TestAnInterfaceNameCannotForgeTheConditionOrEvents(t *testing.T) {
	set := compiledSetWith(t, evaluator.Limits{}, &v1alpha1.ClusterIPAMPolicy{ObjectMeta: metav1.ObjectMeta{Name: "busy"},
		Spec: v1alpha1.ClusterIPAMPolicySpec{SkipRules: []v1alpha1.SkipRule{
			{Name: "busy", Reason: "Busy", Message: "busy", Expression: "true"}}}})
	forged := "corp: Attached; ClusterNetwork/db: NetworkNotFound: ok\nline2\u202e"
	names := []string{forged, "a;b", "plain-name.x_1"}
	s := manyInterfaces(set, len(names))
	for i, name := range names {
		s.vm.Spec.Networks[i].Name, s.interfaces[i].spec.Name = name, name
		s.interfaces[i].key = "ClusterNetwork/" + name
	}
	s.pending = []string{"ClusterNetwork/" + forged}
	if err := decide(context.Background(), s, evaluator.Options{}, errVMBudget); err != nil {
		t.Fatal(err)
	}
	st := desiredStatus(s)
	c := meta.FindStatusCondition(st.Conditions, ConditionNetworkReady)
	items := strings.Split(c.Message, "; ")
	if len(items) != len(names) || strings.ContainsAny(c.Message, "\n\u202e") {
		t.Fatalf("NetworkReady = %q: want %d items, no line break, no bidi override", c.Message, len(names))
	}
	for i, name := range names {
		label, rest, _ := strings.Cut(strings.TrimPrefix(items[i], "ClusterNetwork/"), ": Busy: ")
		if got := unquoteName(t, label); got != name || rest != "busy" {
			t.Errorf("item %d = %q: names %q, want %q", i, items[i], got, name)
		}
	}
	if items[2] != "ClusterNetwork/plain-name.x_1: Busy: busy" {
		t.Errorf("a plain name is quoted: %q", items[2])
	}
	restart := meta.FindStatusCondition(st.Conditions, ConditionAwaitingRestart)
	if restart == nil || strings.ContainsAny(restart.Message, ";\n\u202e") {
		t.Errorf("AwaitingRestart = %+v: want the name quoted", restart)
	}
	rec := &recordingRecorder{}
	(&Reconciler{Recorder: rec}).announceSkips(s, &Plan{Interfaces: results(s)})
	if !reflect.DeepEqual(rec.notes, items) {
		t.Errorf("events %q, want the items %q", rec.notes, items)
	}
}

// unquoteName is the name a label shows: as it is, or unquoted when quoted.
func unquoteName(t *testing.T, label string) string {
	t.Helper()
	if !strings.HasPrefix(label, `"`) {
		return label
	}
	name, err := strconv.Unquote(label)
	if err != nil {
		t.Fatalf("label %q: %v", label, err)
	}
	return name
}

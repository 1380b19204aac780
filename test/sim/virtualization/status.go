package virtualization

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
	ipamv1 "github.com/vmipam/vmipam/policies/v1alpha1"
	"github.com/vmipam/vmipam/test/sim/internal/mac"
)

// nicKey is a NIC's network, as status.networks entries are matched to spec.networks entries.
type nicKey struct {
	Type virtv1.NetworkType
	Name string
}

// ensureNetworks returns vm's status.networks with an entry for every spec.networks entry, in
// spec order, each with its deterministic MAC (the one the entry had, else mac.NIC): VC
// rebuilds the list wholesale on every reconcile (VC facts §5). The addresses are filled in by
// writeStatus.
func ensureNetworks(vm *virtv1.VirtualMachine) []virtv1.NetworksStatus {
	out := make([]virtv1.NetworksStatus, 0, len(vm.Spec.Networks))
	nth := map[nicKey]int{}
	for _, n := range vm.Spec.Networks {
		k := nicKey{Type: n.Type, Name: n.Name}
		e := virtv1.NetworksStatus{ID: n.ID, Type: n.Type, Name: n.Name, VirtualMachineMACAddressName: n.VirtualMachineMACAddressName}
		e.MACAddress = macOf(vm, k, nth[k])
		if e.MACAddress == "" {
			e.MACAddress = mac.NIC(vm.Namespace, vm.Name, string(n.Type), n.Name, nth[k])
		}
		nth[k]++
		out = append(out, e)
	}
	return out
}

// ConditionRunning is the condition the stand-in writes in ReportGuest mode, as VC reports its
// guest: True while a launcher pod runs, its message naming the pod and how many NICs SDN has
// configured on it (from networks-status).
const ConditionRunning = "Running"

// StatusGuestOSInfo is the status field (of the real CRD, unknown to vmipam's Go types) in
// which the stand-in reports a running VM's guest once, when it starts running: GuestOSInfo.
// Every later status Update must keep it.
const StatusGuestOSInfo = "guestOSInfo"

// GuestOSInfo is what the stand-in reports in status.guestOSInfo.
var GuestOSInfo = map[string]any{"name": "Stand-in Linux", "kernelRelease": "6.12.0-vmipam"}

// ReasonWaitingForSDN is the NetworkReady item of an interface a running pod is to carry but
// whose networks-status SDN has not reported yet (VC: "waiting for SDN to report status"), or
// reports with a condition that is not True (VC: the condition's message).
const ReasonWaitingForSDN = "WaitingForSDN"

// ConditionConfigurationApplied is VC's VM condition on whether the KVVM follows the VM
// (vmcondition.TypeConfigurationApplied). SyncKvvmHandler.Handle (VC's
// pkg/controller/vm/internal/sync_kvvm.go) writes it only while False and removes it
// otherwise, and always in phase Pending, Starting or Stopped. The stand-in sets it while a
// running VM's KVVM waits for SDN (waitsForSDN), the one cause of VC's it models.
const ConditionConfigurationApplied = "ConfigurationApplied"

// ReasonConfigurationNotApplied is ConditionConfigurationApplied's reason while False
// (vmcondition.ReasonConfigurationNotApplied).
const ReasonConfigurationNotApplied = "ConfigurationNotApplied"

// MessageWaitingForSDN is ConditionConfigurationApplied's message while the KVVM waits for
// SDN: the one SyncKvvmHandler.Handle writes when syncKVVM returns errWaitForNetworkReady
// (sync_kvvm.go, "4. Set ConfigurationApplied condition").
const MessageWaitingForSDN = "Waiting for SDN to configure network interfaces."

// SDNRecheck is how soon a VM whose KVVM waits for SDN is looked at again:
// SyncKvvmHandler.Handle requeues after 5 s while it waits for the network (sync_kvvm.go).
// SDN's networks-status wakes the VM sooner (launcherPodChanged); this bounds a lost event.
const SDNRecheck = 5 * time.Second

// writeStatus rebuilds the status fields VC owns — phase, status.networks with each attached
// NIC's address (from the oldest running pod's networks-status while the VM runs, from the
// record while it does not: the gate's contract, docs/INTEGRATION.md), NetworkReady,
// AwaitingRestartToApplyConfiguration, ConfigurationApplied (False while apply left the KVVM
// waiting for SDN, absent otherwise), guestOSInfo as the VM starts running and, in ReportGuest
// mode, the Running condition — into the VM as it was read, and writes the whole status with
// an Update under the resourceVersion read, as VC does: a concurrent writer's change is a
// conflict, retried. Status fields the stand-in does not build (other conditions, fields of the
// real CRD it does not know) are written back as they were read.
func (s *Simulator) writeStatus(ctx context.Context, st *vmState, res consumer.Result) error {
	status := st.vm.Status.DeepCopy()
	status.Phase = phaseOf(shouldRun(st.vm), st.pods)
	var nics []sdnv1.NetworksStatusEntry
	if len(st.pods) > 0 {
		_ = json.Unmarshal([]byte(st.pods[0].Annotations[sdnv1.AnnotationNetworksStatus]), &nics) // absent or unreadable: none
	}
	for i := range status.Networks {
		n := &status.Networks[i]
		if len(st.pods) > 0 {
			n.IPAddress = configuredAddress(nics, *n)
		} else {
			n.IPAddress = res.Addresses[string(n.Type)+"/"+n.Name]
		}
	}
	items := slices.Clone(res.Items)
	if len(st.pods) > 0 {
		items = append(items, podsWaitingForSDN(res.Live, st.pods, st.others)...)
	}
	meta.SetStatusCondition(&status.Conditions, consumer.NetworkReady(items, additional(st.vm), st.vm.Generation))
	if c := consumer.AwaitingRestart(res.Held, st.vm.Generation); c != nil {
		meta.SetStatusCondition(&status.Conditions, *c)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, consumer.ConditionAwaitingRestart)
	}
	if st.kvvmWaits {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: ConditionConfigurationApplied,
			Status: metav1.ConditionFalse, Reason: ReasonConfigurationNotApplied, Message: MessageWaitingForSDN,
			ObservedGeneration: st.vm.Generation})
	} else {
		meta.RemoveStatusCondition(&status.Conditions, ConditionConfigurationApplied)
	}
	if s.ReportGuest {
		setRunning(status, st.vm.Generation, st.pods, nics)
	}
	return s.updateStatus(ctx, st.raw, status)
}

// updateStatus writes status into raw's status and updates it when it changed.
func (s *Simulator) updateStatus(ctx context.Context, raw *unstructured.Unstructured, status *virtv1.VirtualMachineStatus) error {
	written := raw.DeepCopy()
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return err
	}
	current, _, _ := unstructured.NestedMap(raw.Object, "status")
	merged := map[string]any{}
	for k, v := range current {
		merged[k] = v
	}
	for _, k := range []string{"phase", "networks", "conditions"} {
		if v, ok := fields[k]; ok {
			merged[k] = v
		} else {
			delete(merged, k)
		}
	}
	if status.Phase == virtv1.PhaseRunning && current["phase"] != string(virtv1.PhaseRunning) {
		merged[StatusGuestOSInfo] = runtime.DeepCopyJSONValue(GuestOSInfo)
	}
	if equality.Semantic.DeepEqual(merged, current) {
		return nil
	}
	if err := unstructured.SetNestedField(written.Object, merged, "status"); err != nil {
		return err
	}
	if err := s.Client.Status().Update(ctx, written); err != nil {
		return fmt.Errorf("writing status of VM %s: %w", klog.KObj(raw), err)
	}
	s.wrote(written)
	return nil
}

// configuredAddress is the address SDN configured for the NIC of entry: the first non-empty
// ipAddressConfigs[].address of the networks-status entry of its network (VC facts §5).
func configuredAddress(nics []sdnv1.NetworksStatusEntry, entry virtv1.NetworksStatus) string {
	for _, n := range nics {
		if n.Type != string(entry.Type) || n.Name != entry.Name {
			continue
		}
		for _, c := range n.IPAddressConfigs {
			if c.Address != "" {
				return c.Address
			}
		}
	}
	return ""
}

// waitingForSDN are the items of what SDN has not configured on a pod whose networks-status
// reports nics, as VC's extractNetworkStatusFromPods (pkg/controller/vm/internal/network.go)
// finds it: every reported NIC with a condition that is not True (collectInterfaceErrors: every
// NIC reported, not only the live ones), and every live entry not reported. An entry is matched
// by type and name; VC matches by name alone, which differs only for a Network and a
// ClusterNetwork of the same name.
func waitingForSDN(live []sdnv1.NetworksSpecEntry, nics []sdnv1.NetworksStatusEntry) []consumer.Item {
	var out []consumer.Item
	for _, n := range nics {
		if failing := failingConditions(n); failing != "" {
			out = append(out, consumer.Item{Label: consumer.Label(n.Type, n.Name), Reason: ReasonWaitingForSDN,
				Message: "SDN reports it not configured: " + failing})
		}
	}
	for _, e := range live {
		if !slices.ContainsFunc(nics, func(n sdnv1.NetworksStatusEntry) bool { return n.Type == e.Type && n.Name == e.Name }) {
			out = append(out, consumer.Item{Label: consumer.Label(e.Type, e.Name), Reason: ReasonWaitingForSDN,
				Message: "waiting for SDN to report status"})
		}
	}
	return out
}

// podsWaitingForSDN are waitingForSDN's items over every launcher pod of the groups, oldest
// first, one per interface (the first pod's): VC's extractNetworkStatusFromPods reads every
// labelled pod, so NetworkReady stays False while a migration target, or any other pod the
// record was applied to, has not reported what the oldest one has.
func podsWaitingForSDN(live []sdnv1.NetworksSpecEntry, groups ...[]corev1.Pod) []consumer.Item {
	var out []consumer.Item
	for _, pods := range groups {
		for i := range pods {
			var nics []sdnv1.NetworksStatusEntry
			_ = json.Unmarshal([]byte(pods[i].Annotations[sdnv1.AnnotationNetworksStatus]), &nics) // absent or unreadable: none
			for _, item := range waitingForSDN(live, nics) {
				if !slices.ContainsFunc(out, func(o consumer.Item) bool { return o.Label == item.Label }) {
					out = append(out, item)
				}
			}
		}
	}
	return out
}

// failingConditions lists the conditions of nic that are not True, as "<type>=<status>
// (<reason>)" separated by ", "; "" when every one is True. Names and reasons go through
// consumer.QuoteName: SDN writes them, and they end up in the NetworkReady message.
func failingConditions(nic sdnv1.NetworksStatusEntry) string {
	var out []string
	for _, c := range nic.Conditions {
		if c.Status != string(metav1.ConditionTrue) {
			out = append(out, fmt.Sprintf("%s=%s (%s)", consumer.QuoteName(c.Type), consumer.QuoteName(c.Status),
				consumer.QuoteName(c.Reason)))
		}
	}
	return strings.Join(out, ", ")
}

// sdnConfigured reports whether SDN has configured the live entries on pod, as VC's
// isNetworkReadyOnPod (pkg/controller/vm/internal/sync_kvvm.go) requires of every launcher
// pod before it updates the KVVM: networks-status is present (and readable: VC fails the
// reconcile on one that is not), and waitingForSDN finds nothing in it.
func sdnConfigured(live []sdnv1.NetworksSpecEntry, pod *corev1.Pod) bool {
	raw, ok := pod.Annotations[sdnv1.AnnotationNetworksStatus]
	if !ok {
		return false
	}
	var nics []sdnv1.NetworksStatusEntry
	return json.Unmarshal([]byte(raw), &nics) == nil && len(waitingForSDN(live, nics)) == 0
}

// additional counts vm's additional spec.networks entries.
func additional(vm *virtv1.VirtualMachine) int {
	n := 0
	for _, e := range vm.Spec.Networks {
		if e.Type != virtv1.NetworkTypeMain {
			n++
		}
	}
	return n
}

// phaseOf is the phase of a VM that should (not) run and has pods.
func phaseOf(run bool, pods []corev1.Pod) virtv1.Phase {
	switch {
	case len(pods) > 1 && migrationTarget(pods) != nil:
		return virtv1.PhaseMigrating
	case len(pods) > 0:
		return virtv1.PhaseRunning
	case run:
		return virtv1.PhaseStarting
	default:
		return virtv1.PhaseStopped
	}
}

// setRunning sets ConditionRunning: whether a launcher pod runs, and how many NICs SDN has
// configured on it.
func setRunning(status *virtv1.VirtualMachineStatus, generation int64, pods []corev1.Pod, nics []sdnv1.NetworksStatusEntry) {
	c := metav1.Condition{Type: ConditionRunning, Status: metav1.ConditionFalse, Reason: "NoLauncherPod",
		Message: "no launcher pod runs", ObservedGeneration: generation}
	if len(pods) > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, "LauncherPodRunning"
		c.Message = fmt.Sprintf("launcher pod %s runs with %d additional NICs configured", pods[len(pods)-1].Name, len(nics))
	}
	meta.SetStatusCondition(&status.Conditions, c)
}

// observeRecord writes generation into the record's status.observedGeneration, the
// generation the VM's template and running pods now follow (0: no record decides). It is not
// called while the KVVM waits for SDN: the pods follow then, the KVVM does not yet.
func (s *Simulator) observeRecord(ctx context.Context, rec *ipamv1.VirtualMachineIPAM, generation int64) error {
	if rec == nil || generation == 0 || rec.Status.ObservedGeneration == generation {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"observedGeneration": generation}})
	if err := s.Client.Status().Patch(ctx, rec, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("writing status of record %s: %w", klog.KObj(rec), err)
	}
	s.wrote(rec)
	return nil
}

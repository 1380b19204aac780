package soak

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// snapshot is the world as the API server shows it at one moment (three Lists).
type snapshot struct {
	vms  map[string]*vmv1.VirtualMachine         // by name, not being deleted
	uids map[string]bool                         // UIDs of every VM, also those being deleted
	pods []corev1.Pod                            // launcher pods
	ips  map[string]*sdnv1.IPAddress             // by name
	recs map[string]*v1alpha1.VirtualMachineIPAM // decision records, by VM name
}

func observe(ctx context.Context, c client.Client) (*snapshot, error) {
	var vms vmv1.VirtualMachineList
	var pods corev1.PodList
	var ips sdnv1.IPAddressList
	var recs v1alpha1.VirtualMachineIPAMList
	for _, l := range []client.ObjectList{&vms, &pods, &ips, &recs} {
		if err := c.List(ctx, l, client.InNamespace(namespace)); err != nil {
			return nil, err
		}
	}
	s := &snapshot{vms: map[string]*vmv1.VirtualMachine{}, uids: map[string]bool{}, ips: map[string]*sdnv1.IPAddress{},
		recs: map[string]*v1alpha1.VirtualMachineIPAM{}}
	for i := range vms.Items {
		vm := &vms.Items[i]
		s.uids[string(vm.UID)] = true
		if vm.DeletionTimestamp == nil {
			s.vms[vm.Name] = vm
		}
	}
	for _, p := range pods.Items {
		if p.Labels[vmv1.LabelLauncherVMName] != "" {
			s.pods = append(s.pods, p)
		}
	}
	for i := range ips.Items {
		s.ips[ips.Items[i].Name] = &ips.Items[i]
	}
	for i := range recs.Items {
		s.recs[recs.Items[i].Name] = &recs.Items[i]
	}
	return s, nil
}

// livePods are the launcher pods that have not finished of VMs that exist and are not being
// deleted (a deleted VM's Auto IPAddresses go with it, by garbage collection), oldest first.
func (s *snapshot) livePods(active bool) []corev1.Pod {
	var out []corev1.Pod
	for _, p := range s.pods {
		vm := s.vms[p.Labels[vmv1.LabelLauncherVMName]]
		if vm == nil || metav1.GetControllerOf(&p) == nil || metav1.GetControllerOf(&p).UID != vm.UID ||
			p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || active && p.DeletionTimestamp != nil {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return out
}

func entries(o client.Object) []sdnv1.NetworksSpecEntry {
	out, _ := sdnv1.ParseNetworksSpec(o.GetAnnotations()[sdnv1.AnnotationNetworksSpec])
	return out
}

// isStatic reports whether name is one of the soak's static IPAddresses (the user's: the soak
// deletes them under running guests on purpose).
func isStatic(name string) bool { return strings.HasPrefix(name, "s-") }

// lostAddresses: no launcher pod of a live VM names an Auto IPAddress that does not exist
// (no address is lost under a live guest). Cheap: checked continuously.
func (s *snapshot) lostAddresses() []string {
	var out []string
	for _, p := range s.livePods(false) {
		for _, e := range entries(&p) {
			for _, n := range e.IPAddressNames {
				if !isStatic(n) && s.ips[n] == nil {
					out = append(out, fmt.Sprintf("pod %s (VM %s) names IPAddress %s, which does not exist", p.Name, p.Labels[vmv1.LabelLauncherVMName], n))
				}
			}
		}
	}
	return out
}

// sharedAddresses: no two VMs' attached interfaces carry the same address on one network, and
// no static IPAddress has two holders.
func (s *snapshot) sharedAddresses() []string {
	byAddress, byName := map[string]string{}, map[string]string{}
	var out []string
	for _, p := range s.livePods(true) {
		vm := p.Labels[vmv1.LabelLauncherVMName]
		for _, e := range entries(&p) {
			for _, n := range e.IPAddressNames {
				if other, ok := byName[n]; ok && other != vm {
					out = append(out, fmt.Sprintf("IPAddress %s is attached to VMs %s and %s", n, other, vm))
				}
				byName[n] = vm
				ip := s.ips[n]
				if ip == nil || ip.Status.Address == "" {
					continue
				}
				key := e.Type + "/" + e.Name + "/" + ip.Status.Address
				if other, ok := byAddress[key]; ok && other != vm {
					out = append(out, fmt.Sprintf("address %s is attached to VMs %s and %s", key, other, vm))
				}
				byAddress[key] = vm
			}
		}
	}
	return out
}

// autoIPAddresses: at most one Auto IPAddress per (VM UID, network); none whose owner is gone
// (once garbage collection ran: at a quiet point); every decoy of a live VM still there.
func (s *snapshot) autoIPAddresses(decoys map[string]string) []string {
	var out []string
	seen := map[string]string{}
	for name, ip := range s.ips {
		ref := metav1.GetControllerOf(ip)
		if ip.Spec.Type != sdnv1.IPAddressTypeAuto || ref == nil || ip.Annotations[plan.AnnotationInterface] == "" {
			continue
		}
		key := string(ref.UID) + "/" + ip.Spec.NetworkRef.Kind + "/" + ip.Spec.NetworkRef.Name
		if other, ok := seen[key]; ok {
			out = append(out, fmt.Sprintf("two Auto IPAddresses %s and %s for %s", other, name, key))
		}
		seen[key] = name
		if !s.uids[string(ref.UID)] {
			out = append(out, fmt.Sprintf("Auto IPAddress %s outlives its VM %s", name, ref.Name))
		}
	}
	live := map[string]bool{}
	for _, vm := range s.vms {
		live[string(vm.UID)] = true
	}
	for name, uid := range decoys {
		if live[uid] && s.ips[name] == nil {
			out = append(out, fmt.Sprintf("decoy %s (not made by vmipam) was deleted while its VM lives", name))
		}
	}
	return out
}

// staticsUntouched: the user's static IPAddresses are never modified by vmipam (their spec
// generation stays 1, and they get no owner, label or annotation).
func (s *snapshot) staticsUntouched() []string {
	var out []string
	for name, ip := range s.ips {
		if isStatic(name) && (ip.Generation != 1 || len(ip.OwnerReferences) > 0 || len(ip.Labels) > 0 || len(ip.Annotations) > 0) {
			out = append(out, fmt.Sprintf("static IPAddress %s was modified: generation %d, owners %v, labels %v, annotations %v",
				name, ip.Generation, ip.OwnerReferences, ip.Labels, ip.Annotations))
		}
	}
	return out
}

// statusAgrees: every VM's status.networks[].ipAddress is the address of the IPAddress its
// attached NIC carries (the oldest running pod's networks-spec; for a VM without one, what its
// decision record attaches at the next start), and NetworkReady is current and True only when
// every interface is attached. Checked at quiet points.
func (s *snapshot) statusAgrees() []string {
	var out []string
	pods := map[string][]corev1.Pod{}
	for _, p := range s.livePods(true) {
		vm := p.Labels[vmv1.LabelLauncherVMName]
		pods[vm] = append(pods[vm], p)
	}
	for name, vm := range s.vms {
		carried := s.nextBoot(vm)
		if ps := pods[name]; len(ps) > 0 {
			carried = entries(&ps[0])
		}
		attached := map[string]sdnv1.NetworksSpecEntry{}
		for _, e := range carried {
			attached[e.Type+"/"+e.Name] = e
		}
		ready := meta.FindStatusCondition(vm.Status.Conditions, consumer.ConditionNetworkReady)
		if ready == nil || ready.ObservedGeneration != vm.Generation {
			out = append(out, fmt.Sprintf("VM %s: NetworkReady %v is not of generation %d", name, ready, vm.Generation))
			continue
		}
		seen := map[string]bool{}
		for _, n := range vm.Spec.Networks {
			key := string(n.Type) + "/" + n.Name
			if n.Type == vmv1.NetworkTypeMain || seen[key] {
				continue
			}
			seen[key] = true
			e, ok := attached[key]
			if !ok && ready.Status == metav1.ConditionTrue {
				out = append(out, fmt.Sprintf("VM %s: NetworkReady True but %s is not attached", name, key))
			}
			want := ""
			if ok && len(e.IPAddressNames) > 0 {
				if ip := s.ips[e.IPAddressNames[0]]; ip != nil && meta.IsStatusConditionTrue(ip.Status.Conditions, sdnv1.ConditionAllocated) {
					want = ip.Status.Address
				}
			}
			if got := statusAddress(vm, n); got != want {
				out = append(out, fmt.Sprintf("VM %s: status shows %q on %s, the attached NIC carries %q", name, got, key, want))
			}
		}
	}
	return out
}

// nextBoot is what the VM's decision record attaches when the VM starts (DESIGN.md §2.3): none
// when the record is missing or of another VM of that name.
func (s *snapshot) nextBoot(vm *vmv1.VirtualMachine) []sdnv1.NetworksSpecEntry {
	r := s.recs[vm.Name]
	if r == nil || r.Spec.VMUID != vm.UID {
		return nil
	}
	var out []sdnv1.NetworksSpecEntry
	for i := range r.Spec.Interfaces {
		if d := &r.Spec.Interfaces[i]; d.Attach && !d.Removed {
			out = append(out, consumer.Entry(d, ""))
		}
	}
	return out
}

// statusAddress is the first status.networks entry's ipAddress for spec's network.
func statusAddress(vm *vmv1.VirtualMachine, spec vmv1.NetworksSpec) string {
	for _, n := range vm.Status.Networks {
		if n.Type == spec.Type && n.Name == spec.Name {
			return n.IPAddress
		}
	}
	return ""
}

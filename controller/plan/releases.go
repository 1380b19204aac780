package plan

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// ReleaseGrace is how long an address the VM's record stopped wanting stays the VM's: an Auto
// IPAddress is deleted no sooner, and a static IPAddress is handed to another VM no sooner
// (holders). The wait is timed from the record write that let the address go — kept in the
// record (spec.releases), so a new leader honours a wait its predecessor started — and an Auto
// IPAddress is deleted only once, after it, neither the cache nor a read past the cache finds
// anything naming it: the live VM's spec, or a launcher pod that has not finished.
//
// Why: a launcher pod is made from its creator's read of the VM's next-boot configuration —
// the virtualization controller's of the record, KubeVirt's of the template built from it —,
// and no API precondition ties the pod's create to that read. A pod created a moment after the
// record let an address go can therefore still carry it, and appear only after the read that
// guarded the delete. The grace lets such a pod appear first; a creator whose read is older
// than the grace is not covered (docs/RELIABILITY.md, "Release grace"). Deleting later only
// holds the address a little longer: nobody else can be given it meanwhile.
const ReleaseGrace = 5 * time.Second

// releases is the record's release bookkeeping for spec, the decisions this reconcile
// records: an Auto release for every Auto IPAddress vmipam made for the VM that no decision
// wants, timed from the record write that first let it go (kept from the observed record),
// and a Static release for every static IPAddress the observed record attached and spec does
// not — timed from this write — or that an earlier write let go less than ReleaseGrace ago.
// Sorted, so that equal bookkeeping compares equal.
func releases(s *scope, spec *v1alpha1.VirtualMachineIPAMSpec) []v1alpha1.Release {
	var prev []v1alpha1.Release
	var prevDecisions []v1alpha1.InterfaceDecision
	if s.record != nil && s.record.Spec.VMUID == s.vm.UID {
		prev, prevDecisions = s.record.Spec.Releases, s.record.Spec.Interfaces
	}
	now := metav1.NewMicroTime(s.now)
	wanted := wantedByDecisions(s, spec)
	var out []v1alpha1.Release
	for i := range s.owned {
		ip := &s.owned[i]
		if !Ours(ip, s.vm) || wanted[ip.Name] || ip.DeletionTimestamp != nil {
			continue
		}
		rel := v1alpha1.Release{Type: v1alpha1.ReleaseAuto, IPAddressName: ip.Name, UID: ip.UID, Since: now}
		if old := findRelease(prev, v1alpha1.ReleaseAuto, ip.Name, ip.UID); old != nil {
			rel.Since = old.Since
		}
		out = append(out, rel)
	}
	attached := attachedNames(spec)
	for _, d := range prevDecisions {
		if d.Attach && d.Allocation == v1alpha1.AllocationStatic && d.IPAddressName != "" && !attached[d.IPAddressName] &&
			findRelease(out, v1alpha1.ReleaseStatic, d.IPAddressName, "") == nil {
			out = append(out, v1alpha1.Release{Type: v1alpha1.ReleaseStatic, IPAddressName: d.IPAddressName, Since: now})
		}
	}
	for _, r := range prev {
		if r.Type == v1alpha1.ReleaseStatic && !attached[r.IPAddressName] && r.Since.Add(ReleaseGrace).After(s.now) &&
			findRelease(out, v1alpha1.ReleaseStatic, r.IPAddressName, "") == nil {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b v1alpha1.Release) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.IPAddressName, b.IPAddressName), cmp.Compare(a.UID, b.UID))
	})
	return out
}

// findRelease is the release of that type, name and UID ("" for any) in list, or nil.
func findRelease(list []v1alpha1.Release, t v1alpha1.ReleaseType, name string, uid types.UID) *v1alpha1.Release {
	for i := range list {
		if r := &list[i]; r.Type == t && r.IPAddressName == name && (uid == "" || r.UID == uid) {
			return r
		}
	}
	return nil
}

// wantedByDecisions are the IPAddress names the decisions keep: the Auto IPAddress of every
// interface that holds one (holdsAddress), of every interface whose decision failed, and of
// every interface without ipAddressName whose network is missing (it may come back; the spec
// still names it); every IPAddress a spec entry names; and every one the record attaches (an
// interface kept through a transient problem, a removal held until restart).
func wantedByDecisions(s *scope, spec *v1alpha1.VirtualMachineIPAMSpec) map[string]bool {
	wanted := attachedNames(spec)
	for _, it := range s.interfaces {
		switch {
		case holdsAddress(it), it.decision.Allocation == evaluator.AllocationUnknown,
			it.spec.IPAddressName == "" && !it.network.exists:
			wanted[it.autoName] = true
		}
		if it.spec.IPAddressName != "" {
			wanted[it.spec.IPAddressName] = true
		}
	}
	return wanted
}

// releasesDue returns the Auto IPAddresses of rec's releases whose ReleaseGrace has passed and
// that no launcher pod that has not finished carries (as the cache shows it), and how long
// until the next release still waiting is due (0: none). One a pod still carries is left: the
// pod's change brings the VM back.
func releasesDue(s *scope, rec *v1alpha1.VirtualMachineIPAM) (due []*sdnv1.IPAddress, wait time.Duration) {
	carried := map[string]bool{}
	for _, pods := range [][]corev1.Pod{s.pods, s.terminating} {
		for i := range pods {
			for _, e := range parseNetworksSpec(pods[i].Annotations[sdnv1.AnnotationNetworksSpec]) {
				for _, name := range e.IPAddressNames {
					carried[name] = true
				}
			}
		}
	}
	for _, rel := range rec.Spec.Releases {
		ip := ownedWithUID(s, rel.UID)
		if rel.Type != v1alpha1.ReleaseAuto || ip == nil || ip.Name != rel.IPAddressName {
			continue
		}
		if left := rel.Since.Add(ReleaseGrace).Sub(s.now); left > 0 {
			wait = soonest(wait, left)
			continue
		}
		if !carried[rel.IPAddressName] {
			due = append(due, ip)
		}
	}
	return due, wait
}

// releasing are the names of rec's Auto releases whose IPAddress still exists.
func releasing(s *scope, rec *v1alpha1.VirtualMachineIPAM) []string {
	var out []string
	for _, rel := range rec.Spec.Releases {
		if ip := ownedWithUID(s, rel.UID); rel.Type == v1alpha1.ReleaseAuto && ip != nil && ip.Name == rel.IPAddressName {
			out = append(out, rel.IPAddressName)
		}
	}
	return out
}

// ownedWithUID is the VM's owned IPAddress of that UID, nil when there is none.
func ownedWithUID(s *scope, uid types.UID) *sdnv1.IPAddress {
	for i := range s.owned {
		if s.owned[i].UID == uid && uid != "" {
			return &s.owned[i]
		}
	}
	return nil
}

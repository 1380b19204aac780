package vm

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// jsonPatchOp is one RFC 6902 operation. Value is never omitted: a test of "" must compare
// with "", not with a missing value.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// statusJSONPatch returns the RFC 6902 patch that turns observed into desired (desiredStatus of
// it) by touching only vmipam's own fields, each guarded by a test of what vmipam read to find
// it, or ok=false when no such patch exists and the caller must fall back to a patch under the
// observed resourceVersion.
//
// Both lists vmipam writes in are atomic in the virtualization platform's CRD (no
// x-kubernetes-list-type, so neither server-side apply nor a merge patch can set one entry's
// field): a merge patch replaces the whole list, and without a lock it would drop what another
// writer (the virtualization controller: macAddress, its own conditions) put there since vmipam
// read it; with the resourceVersion as lock, every write of anybody — phase, guestOSInfo, a
// label — refuses it. The JSON patch instead addresses the entries vmipam changes by index and
// tests that each index still holds the entry vmipam means (type and name of a status.networks
// entry; the type, and for a removal the reason, of a condition), so a concurrent change
// anywhere else is kept and costs nothing, and a concurrent change of the list's shape fails
// the test (422, reported as a conflict by errFromStatusPatch) instead of being overwritten.
//
// It needs the lists to exist already in the observed shape: status.networks with the entries
// desired has, in the same order, differing only in ipAddress; status.conditions with every
// condition desired has. Otherwise (the first write of a VM, a spec entry added or removed, a
// condition added) the whole list is vmipam's to build and ok is false.
func statusJSONPatch(observed, desired *vmv1.VirtualMachineStatus) (ops []jsonPatchOp, ok bool) {
	nets, ok := networksOps(observed.Networks, desired.Networks)
	if !ok {
		return nil, false
	}
	conds, ok := conditionsOps(observed.Conditions, desired.Conditions)
	if !ok {
		return nil, false
	}
	return append(nets, conds...), true
}

// networksOps sets or removes ipAddress per entry whose ipAddress differs, testing the entry's
// type and name at that index.
func networksOps(observed, desired []vmv1.NetworksStatus) ([]jsonPatchOp, bool) {
	if len(observed) != len(desired) {
		return nil, false
	}
	var ops []jsonPatchOp
	for i := range desired {
		o, d := observed[i], desired[i]
		o.IPAddress = d.IPAddress
		if !equality.Semantic.DeepEqual(o, d) {
			return nil, false // another entry than the one observed at i
		}
		if observed[i].IPAddress == d.IPAddress {
			continue
		}
		if d.Type == "" || d.Name == "" {
			return nil, false // nothing to test the entry by
		}
		at := fmt.Sprintf("/status/networks/%d", i)
		ops = append(ops, jsonPatchOp{"test", at + "/type", string(d.Type)}, jsonPatchOp{"test", at + "/name", d.Name})
		if d.IPAddress == "" {
			ops = append(ops, jsonPatchOp{Op: "remove", Path: at + "/ipAddress"})
		} else {
			ops = append(ops, jsonPatchOp{"add", at + "/ipAddress", d.IPAddress})
		}
	}
	return ops, true
}

// conditionsOps replaces or removes the conditions vmipam writes (those whose type is in desired
// or that desired lacks but observed has) and leaves every other entry alone, or reports false
// when a condition must be added. A replacement and a removal test the type at the index (a
// removal the reason too: vmipam removes only its own AwaitingRestart); removals go from the
// highest index down so that the indexes tested stay those observed. Both are idempotent: a
// reconcile that read the VM before its own earlier write reached the cache writes the same,
// or fails its test.
func conditionsOps(observed, desired []metav1.Condition) ([]jsonPatchOp, bool) {
	var ops []jsonPatchOp
	for i := range observed {
		if d := findCondition(desired, observed[i].Type); d != nil && !equality.Semantic.DeepEqual(*d, observed[i]) {
			at := fmt.Sprintf("/status/conditions/%d", i)
			ops = append(ops, jsonPatchOp{"test", at + "/type", d.Type}, jsonPatchOp{"replace", at, *d})
		}
	}
	for i := len(observed) - 1; i >= 0; i-- {
		if findCondition(desired, observed[i].Type) == nil {
			at := fmt.Sprintf("/status/conditions/%d", i)
			ops = append(ops, jsonPatchOp{"test", at + "/type", observed[i].Type},
				jsonPatchOp{"test", at + "/reason", observed[i].Reason}, jsonPatchOp{Op: "remove", Path: at})
		}
	}
	for i := range desired {
		if findCondition(observed, desired[i].Type) == nil {
			// An append is not idempotent: a reconcile that read the VM before its own
			// earlier append reached the cache (and another writer's change in between left
			// the expectation unverified) would add the condition twice, and no test op can
			// assert that a list has no element past the ones read. So it is written under the
			// lock, as the whole list.
			return nil, false
		}
	}
	return ops, true
}

// findCondition returns the condition of type t in list, or nil.
func findCondition(list []metav1.Condition, t string) *metav1.Condition {
	for i := range list {
		if list[i].Type == t {
			return &list[i]
		}
	}
	return nil
}

// marshalOps encodes a JSON patch.
func marshalOps(ops []jsonPatchOp) ([]byte, error) {
	return json.Marshal(ops)
}

// errFromStatusPatch turns the API server's answer to a failed test operation — 422
// Unprocessable Entity, since the patch itself was well-formed — into a Conflict: another
// writer changed what the patch was computed from, and the reconcile is retried on a fresh
// read, as after a refused optimistic lock. Any other error is returned as it is.
func errFromStatusPatch(err error, name string) error {
	if !apierrors.IsInvalid(err) {
		return err
	}
	msg := err.Error()
	if !strings.Contains(msg, "test failed") && !strings.Contains(msg, "test operation does not apply") &&
		!strings.Contains(msg, "error in test for path") {
		return err
	}
	return apierrors.NewConflict(vmv1.GroupVersion.WithResource("virtualmachines").GroupResource(), name,
		fmt.Errorf("another writer changed the status entries this write was computed from: %w", err))
}

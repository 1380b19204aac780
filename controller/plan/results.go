package plan

import (
	"strings"

	"github.com/vmipam/vmipam/controller/index"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/consumer"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// InterfaceResult is the outcome for one additional interface. The dry-run API serves its
// own copy of it (controller/dryrun/v1alpha1.InterfaceResult, converted in
// controller/dryrun/convert).
type InterfaceResult struct {
	// Index is the position in spec.networks; -1 for a removed interface.
	Index int `json:"index"`
	// Removed: the spec no longer names the interface; Attached says whether the running pod
	// keeps it until the restart because its decision forbids hotplug.
	Removed bool   `json:"removed,omitempty"`
	Type    string `json:"type"`
	Name    string `json:"name"`
	// IPAddressName is the IPAddress the interface carries once its record is applied (the
	// static one or its Auto one), or, when it is not attached, the one it would carry.
	IPAddressName string `json:"ipAddressName,omitempty"`
	// Address is the allocated address of that IPAddress, when attached: what the guest gets.
	Address string `json:"address,omitempty"`
	// Attached: the VM has the interface once its record is applied — its running pods, or
	// its next start when it does not run.
	Attached bool               `json:"attached"`
	Decision evaluator.Decision `json:"decision"`
	// Reason and Message are the interface's NetworkReady item (from the decision, from the
	// controller — DuplicateInterface, IPAddressConflict —, or AwaitingRestart).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// results are the InterfaceResults of the plan, seen through what applying the record gives
// (applied).
func results(s *scope, applied consumer.Result) []InterfaceResult {
	runs := applied.NextBoot
	if applied.Live != nil {
		runs = applied.Live
	}
	have := map[string]sdnv1.NetworksSpecEntry{}
	for _, e := range runs {
		if k := index.NetworkKey(e.Type, e.Name); !hasKey(have, k) {
			have[k] = e
		}
	}
	awaiting := map[string]consumer.Item{}
	for _, item := range applied.Items {
		if item.Reason == consumer.ReasonAwaitingRestart {
			awaiting[item.Label] = item
		}
	}
	out := make([]InterfaceResult, 0, len(s.interfaces)+len(s.removed))
	for _, it := range s.interfaces {
		r := resultOf(s, it, have)
		if it.problem != nil {
			r.Reason, r.Message = it.problem.reason, evaluator.SafeMessage(it.problem.message)
		} else if item, ok := awaiting[consumer.Label(string(it.spec.Type), it.spec.Name)]; ok && it.dupOf < 0 {
			r.Reason, r.Message = item.Reason, item.Message
		}
		out = append(out, r)
	}
	for _, it := range s.removed {
		r := resultOf(s, it, have)
		r.Index, r.Removed = -1, true
		out = append(out, r)
	}
	return out
}

// resultOf is the result of one interface without its item.
func resultOf(s *scope, it *iface, have map[string]sdnv1.NetworksSpecEntry) InterfaceResult {
	r := InterfaceResult{Index: it.index, Type: string(it.spec.Type), Name: it.spec.Name, Decision: it.decision,
		IPAddressName: wouldUse(it)}
	if it.dupOf >= 0 {
		return r
	}
	if e, ok := have[it.key]; ok {
		r.Attached, r.IPAddressName = true, first(e.IPAddressNames)
		r.Address = addressOf(s.ipAddresses[r.IPAddressName])
	}
	return r
}

func hasKey(m map[string]sdnv1.NetworksSpecEntry, k string) bool {
	_, ok := m[k]
	return ok
}

// announce returns the skips of the plan that the observed record did not already decide: an
// interface whose item is new, or whose decision changed (a change now held until restart).
// A steady state announces nothing.
func announce(s *scope, p *Plan) []Skip {
	n := 0
	for _, r := range p.Interfaces {
		if r.Reason != "" {
			n++
		}
	}
	var out []Skip
	for i, it := range s.interfaces {
		r := p.Interfaces[i]
		if r.Reason == "" || !newItem(previousDecision(s, i, it), &p.Record.Spec.Interfaces[i], r) {
			continue
		}
		item := consumer.Item{Label: consumer.Label(r.Type, r.Name), Reason: r.Reason, Message: r.Message}
		out = append(out, Skip{Reason: r.Reason, Note: item.Format(n), Related: relatedIPAddress(it)})
	}
	return out
}

// previousDecision is the observed record's decision for the interface at position i of the
// spec (its entries come in spec order), or nil when that record is another VM's or decided
// another interface there.
func previousDecision(s *scope, i int, it *iface) *v1alpha1.InterfaceDecision {
	if s.record == nil || s.record.Spec.VMUID != s.vm.UID || i >= len(s.record.Spec.Interfaces) {
		return nil
	}
	if d := &s.record.Spec.Interfaces[i]; !d.Removed && keyOf(d) == it.key {
		return d
	}
	return nil
}

// newItem reports whether the item r of an interface decided cur is news against the
// observed record's decision prev (nil: none).
func newItem(prev, cur *v1alpha1.InterfaceDecision, r InterfaceResult) bool {
	if prev == nil {
		return true
	}
	if r.Reason == consumer.ReasonAwaitingRestart {
		return prev.Hotplug != cur.Hotplug || prev.Attach != cur.Attach || prev.IPAddressName != cur.IPAddressName
	}
	return prev.Reason != cur.Reason || prev.Message != cur.Message
}

// relatedIPAddress is the IPAddress an interface uses, as an event's related object, or nil.
func relatedIPAddress(it *iface) *sdnv1.IPAddress {
	switch {
	case it.static != nil:
		return it.static
	case it.auto != nil:
		return it.auto
	}
	return nil
}

// InterfaceLabel is an interface's key ("<Type>/<name>", index.NetworkKey) as messages,
// events and ipamctl show it: consumer.Label of its type and name.
func InterfaceLabel(key string) string {
	typ, name, ok := strings.Cut(key, "/")
	if !ok {
		return consumer.QuoteName(key)
	}
	return consumer.Label(typ, name)
}

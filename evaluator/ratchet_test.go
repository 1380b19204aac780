package evaluator_test

import (
	"testing"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// ratchetPolicy is variable a and a rule sorting it. With a = [vm.name] the rule is harmless;
// with a = [dyn(vm.name)] it sorts values of no known order, which a new expression may not
// (unorderedSortErrors).
func ratchetPolicy(a string, opts ...policyOption) *v1alpha1.ClusterIPAMPolicy {
	return layer("ratchet2", append([]policyOption{variable("a", a),
		skipRule("r", rule, "X", "", "")}, opts...)...)
}

const (
	harmlessA = "[vm.name]"
	nestedA   = "[dyn(vm.name)]"
	rule      = "variables.a.sort().size() == 0"
)

// An expression is checked as stored only when its text AND the variables it reads are
// unchanged (issue #15): an update that changed only the variable a rule reads was admitted
// with the rule's new meaning checked as stored — it failed at run time, and `ipamctl lint`
// (which has no stored object) refused it. Now the webhook refuses it as lint does, at the
// rule, however the variables changed; a variable reading a changed variable is not stored
// either.
func TestAnUnchangedExpressionReadingAChangedVariableIsCheckedAsNew(t *testing.T) {
	c := newCompiler(t)
	if _, errs := c.Compile(ratchetPolicy(harmlessA), nil); len(errs) > 0 {
		t.Fatalf("the stored policy: %v, want it compiled", errs)
	}
	if _, errs := c.Compile(ratchetPolicy(nestedA), nil); len(errs) == 0 {
		t.Fatal("the updated policy as new (lint): compiled, want it refused")
	}
	updates := map[string]struct{ old, update *v1alpha1.ClusterIPAMPolicy }{
		"a's expression changed": {ratchetPolicy(harmlessA), ratchetPolicy(nestedA)},
		"a renamed, b takes its name": {
			layer("ratchet2", variable("a", harmlessA), variable("b", nestedA), skipRule("r", rule, "X", "", "")),
			layer("ratchet2", variable("b", harmlessA), variable("a", nestedA), skipRule("r", rule, "X", "", "")),
		},
		"a changed through a variable it reads": {
			layer("ratchet2", variable("x", harmlessA), variable("a", "variables.x"), skipRule("r", rule, "X", "", "")),
			layer("ratchet2", variable("x", nestedA), variable("a", "variables.x"), skipRule("r", rule, "X", "", "")),
		},
		"the reading variable itself": {
			layer("ratchet2", variable("a", harmlessA), variable("f", "variables.a.sort()"), skipRule("r", "variables.f.size() == 0", "X", "", "")),
			layer("ratchet2", variable("a", nestedA), variable("f", "variables.a.sort()"), skipRule("r", "variables.f.size() == 0", "X", "", "")),
		},
	}
	for name, u := range updates {
		if _, errs := c.Compile(u.old, nil); len(errs) > 0 {
			t.Errorf("%s: the stored policy: %v, want it compiled", name, errs)
			continue
		}
		if _, errs := c.Compile(u.update, nil); len(errs) == 0 {
			t.Errorf("%s: the update as new: compiled, want it refused", name)
		}
		if _, errs := c.Compile(u.update, u.old); len(errs) == 0 {
			t.Errorf("%s: the update of the stored policy: compiled, want it refused as when new", name)
		}
	}
}

// The ratchet still serves its purpose: a stored policy with an expression today's rules
// refuse when new keeps compiling — on updates that leave the expression and what it reads
// as they were (another field changed, a variable it does not read added or changed), and in
// the controller (old is the object itself).
func TestAStoredExpressionTodaysRulesRefuseStillUpdates(t *testing.T) {
	c := newCompiler(t)
	stored := ratchetPolicy(nestedA)
	updates := map[string]*v1alpha1.ClusterIPAMPolicy{
		"unchanged (the controller)":             ratchetPolicy(nestedA),
		"another field changed":                  ratchetPolicy(nestedA, priority(7)),
		"a variable added that it does not read": ratchetPolicy(nestedA, variable("z", "vm.name")),
		"a rule added":                           ratchetPolicy(nestedA, skipRule("s", "vm.name == ''", "Y", "", "")),
	}
	for name, update := range updates {
		if _, errs := c.Compile(update, stored); len(errs) > 0 {
			t.Errorf("%s: %v, want it compiled as stored", name, errs)
		}
	}
	changedUnread := layer("ratchet2", variable("a", nestedA), variable("z", "vm.name"),
		skipRule("r", rule, "X", "", ""))
	update := layer("ratchet2", variable("a", nestedA), variable("z", "vm.namespace"),
		skipRule("r", rule, "X", "", ""))
	if _, errs := c.Compile(update, changedUnread); len(errs) > 0 {
		t.Errorf("a variable it does not read changed: %v, want it compiled as stored", errs)
	}
}

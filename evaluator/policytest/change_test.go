package policytest_test

import (
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator/policytest"
)

// A case whose change contradicts itself or the interface is refused with its name and the
// contradiction (issue #29): the controller never computes such a change, and a hotplug rule
// tested on one proves nothing. A consistent change, or none, is accepted.
func TestACaseWhoseChangeContradictsItsInputIsRefused(t *testing.T) {
	suite := func(input string) string {
		return suiteHeader + "defaults:\n  interface: {ipAddressName: web}\ncases:\n- name: c\n  input: " + input + "\n  expect: {skip: false}\n"
	}
	for _, tc := range []struct{ input, want string }{
		{"{change: {kind: Add, from: {allocation: Auto}, to: {allocation: Auto}}}", "change.kind Add contradicts"},
		{"{change: {kind: None, from: {allocation: Auto}, to: {allocation: None}}}", "change.kind None contradicts"},
		{"{change: {kind: ModeChange, from: {allocation: Auto}, to: {allocation: Auto}}}", "change.kind ModeChange contradicts"},
		{"{change: {kind: Remove, from: {allocation: Auto}, to: {allocation: Auto}}}", "change.kind Remove contradicts"},
		{"{change: {kind: Moved, to: {allocation: Auto}}}", `change.kind: Unsupported value "Moved"`},
		{"{change: {kind: Add, to: {allocation: auto}}}", `change.to.allocation: Unsupported value "auto"`},
		{"{change: {kind: Add, to: {allocation: Static}}}", "change.to is Static without an ipAddressName"},
		{"{change: {kind: Add, to: {allocation: Auto, ipAddressName: web}}}", `change.to names IPAddress "web", but its allocation is "Auto"`},
		{"{change: {kind: Add, to: {allocation: Static, ipAddressName: other}}}", `change.to.ipAddressName "other" is not the interface's ipAddressName "web"`},
	} {
		_, err := policytest.Parse([]byte(suite(tc.input)))
		if err == nil || !strings.Contains(err.Error(), `cases[0] "c": input: `) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.input, err, tc.want)
		}
	}
	for _, ok := range []string{
		"{}",
		"{change: {kind: Add, to: {allocation: Static, ipAddressName: web}, vmRunning: true}}",
		"{change: {kind: None, from: {allocation: Auto}, to: {allocation: Auto}}}",
		"{change: {kind: ModeChange, from: {allocation: Auto}, to: {allocation: Static, ipAddressName: web}}}",
		"{change: {kind: AddressChange, from: {allocation: Static, ipAddressName: old}, to: {allocation: Static, ipAddressName: web}}}",
		"{change: {kind: Remove, from: {allocation: Static, ipAddressName: web}}}",
		// The sides are the applied state and the decided outcome (issue #29, point 1): a
		// skipped interface nothing is applied to is None with both sides empty; one a policy
		// refuses while attached is a Remove from whatever it carries; a transient skip keeps
		// the Static address applied while the spec names another.
		"{change: {kind: None}}",
		"{change: {kind: Remove, from: {allocation: Static, ipAddressName: old}}}",
		"{change: {kind: None, from: {allocation: Static, ipAddressName: old}, to: {allocation: Static, ipAddressName: old}}}",
	} {
		if _, err := policytest.Parse([]byte(suite(ok))); err != nil {
			t.Errorf("%s: %v, want it accepted", ok, err)
		}
	}
}

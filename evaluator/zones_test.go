package evaluator_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/evaluator"
)

// An input map answers a lookup of a key longer than all of its keys as a lookup does. (Keys
// over 317 characters are beyond the declared bounds: a policy reading such a map fails
// before any lookup.)
func TestLongKeysInInputMaps(t *testing.T) {
	c := newCompiler(t)
	longest := strings.Repeat("p", 253) + "/" + strings.Repeat("n", 63)
	for _, tc := range []struct {
		name, key string
		want      bool // the key is present
	}{
		{"longer than every key", strings.Repeat("p", 400), false},
		{"one character longer than the longest key", longest + "n", false},
		{"as long as the longest key, present", longest, true},
		{"short, present", "k", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := withAnnotation(tc.key)
			in.VM.Labels = map[string]string{longest: "v", "k": "v"}
			for _, expr := range []string{
				"vm.annotations['a'] in vm.labels",
				"vm.labels[?vm.annotations['a']].hasValue()",
				"vm.labels[?vm.annotations['a']].orValue('') == 'v'",
			} {
				s := setOf(t, c, newPolicy("p", skipRule("r", expr, "R", "", "")))
				if d := decide(s, in); d.Reason == evaluator.ReasonPolicyError || d.Skip != tc.want {
					t.Errorf("%s: decision = %s %q (skip %v), want skip %v", expr, d.Reason, d.Message, d.Skip, tc.want)
				}
			}
			s := setOf(t, c, newPolicy("p", skipRule("r", "vm.labels[vm.annotations['a']] == 'v'", "R", "", "")))
			d := decide(s, in)
			if want := evaluator.Reason("R"); !tc.want && !strings.Contains(d.Message, "no such key") || tc.want && d.Reason != want {
				t.Errorf("index: decision = %s %q, want skip %v or a no-such-key error", d.Reason, d.Message, tc.want)
			}
		})
	}
}

// A name that is a file of the zone directory but not a zone (tzdata.zi, 114 KB of text) was
// read and parsed on every call for the charge of a zone's load: three admitted rules of 500
// calls each ran into the 1 s deadline on an ordinary input (issue #15, tester atk17). A
// literal such name is refused when written; a computed one is an error that names it (the
// guard's, which answers from what the first load gave: zones_internal_test.go).
func TestANameThatIsNoTimeZoneIsRefused(t *testing.T) {
	c := newCompiler(t)
	rule := func(acc, tz string) string { return "vm.creationTimestamp." + acc + "(" + tz + ") == 99" }
	for _, tz := range []string{"'tzdata.zi'", "'Nowhere/Zone'", "'" + strings.Repeat("x", 100) + "'"} {
		_, errs := c.Compile(newPolicy("p", skipRule("r", rule("getMinutes", tz), "R", "", "")), nil)
		if !strings.Contains(fmt.Sprint(errs), "is not a time zone") && !strings.Contains(fmt.Sprint(errs), "time zone name of 100 bytes") {
			t.Errorf("%s: %v, want refused as no time zone", tz, errs)
		}
	}
	for _, tz := range []string{"'Europe/Berlin'", "'UTC'", "'+02:00'"} {
		if _, errs := c.Compile(newPolicy("p", skipRule("r", rule("getMinutes", tz), "R", "", "")), nil); len(errs) > 0 {
			t.Errorf("%s: %v, want admitted", tz, errs)
		}
	}
	s := setOf(t, c, newPolicy("p", skipRule("r", rule("getHours", "vm.labels[?'tz'].orValue('UTC')"), "R", "", "")))
	in := pooledAuto()
	in.VM.Labels = map[string]string{"tz": "tzdata.zi"}
	for run := range 2 {
		if d := decide(s, in); d.Reason != evaluator.ReasonPolicyError || !strings.Contains(d.Message, `getHours(): "tzdata.zi" is not a time zone`) {
			t.Errorf("run %d: %s %q, want a PolicyError naming the zone", run, d.Reason, d.Message)
		}
	}
	in.VM.Labels["tz"] = "Europe/Berlin"
	if d := decide(s, in); d.Reason == evaluator.ReasonPolicyError {
		t.Errorf("Europe/Berlin: %s %q, want decided", d.Reason, d.Message)
	}
}

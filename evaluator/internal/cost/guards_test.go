package cost

import (
	"strings"
	"testing"
)

// Every guard of a call's work refuses, before the library runs, the arguments past its bound
// and lets those within it through: the result of replace() and join() (built before any
// charge), a string search (receiver × needle), a format validator (input × its regex), a
// sort, format()'s float clauses. Each refusal names the function. The guards of work are
// checked with the per-call limit raised: the library charges those calls by their input
// after they ran, which stops them too.
func TestCallsPastTheirGuardsFailBeforeTheyRun(t *testing.T) {
	raised := testConfig()
	raised.PerCallLimit = 1 << 40
	outputEnv, workEnv := testEnv(t, testConfig()), testEnv(t, raised)
	x := strings.Repeat("a", 1020)
	long := strings.Repeat("a", 200_000)
	for _, tc := range []struct {
		name, expr string
		vm         testVM
		want       string // "" when within the bound
		output     bool   // a bound on what the call produces, at the default per-call limit
	}{
		{"replace: every match by the receiver", "vm.name.replace('a', vm.name) != ''", testVM{Name: x}, "replace(): the result would hold more than", true},
		{"replace: an empty old", "vm.name.replace('', vm.name) != ''", testVM{Name: x}, "replace(): the result would hold more than", true},
		{"replace: its limit bounds the matches", "vm.name.replace('a', vm.name, 10) != ''", testVM{Name: x}, "", true},
		{"join past the output bound", "vm.holders.join(vm.name) != ''", testVM{Name: x, Holders: repeated(x, 1000)}, "join(): the result would hold more than", true},
		{"join within it", "vm.holders.join(',') != ''", testVM{Holders: repeated(x, 100)}, "", true},
		{"indexOf past the search bound", "vm.annotations['a'].indexOf(vm.annotations['b']) >= 0",
			testVM{Annotations: map[string]string{"a": long, "b": strings.Repeat("a", 2000) + "b"}}, "indexOf(): a search of 200000 characters for 2001", false},
		{"lastIndexOf past it", "vm.annotations['a'].lastIndexOf(vm.annotations['b']) >= 0",
			testVM{Annotations: map[string]string{"a": long, "b": "b" + strings.Repeat("a", 2000)}}, "lastIndexOf(): a search", false},
		{"indexOf within it", "vm.annotations['a'].indexOf('ab') >= 0", testVM{Annotations: map[string]string{"a": long}}, "", false},
		{"validate past the regex bound", "format.uri().validate(vm.annotations['a']).hasValue()",
			testVM{Annotations: map[string]string{"a": long}}, "validate(): validating 200000 characters against the URI format's regex", false},
		{"validate within it", "format.dns1123Label().validate(vm.name).hasValue()", testVM{Name: "web-1"}, "", false},
		{"sort past its bound", "vm.holders.sort().size() > 0", testVM{Holders: repeated("h", MaxSortElements+1)}, "sort(): a list of 8193 elements, at most 8192", false},
		{"sortBy past it", "vm.holders.sortBy(h, h).size() > 0", testVM{Holders: repeated("h", MaxSortElements+1)}, "@sortByAssociatedKeys(): a list of 8193 elements", false},
		{"sort within it", "vm.holders.sort().size() > 0", testVM{Holders: repeated("h", 64)}, "", false},
		{"format past its float clauses", "'" + strings.Repeat("%f", MaxFloatClauses+1) + "'.format(" + floats(MaxFloatClauses+1) + ") != ''",
			testVM{}, "format(): argument beyond the bound policies are evaluated with: 101 %f or %e clauses, at most 100", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := workEnv
			if tc.output {
				env = outputEnv
			}
			_, _, err := eval(t, env, tc.expr, tc.vm)
			if tc.want == "" {
				if err != nil {
					t.Errorf("%v, want it within its bound", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

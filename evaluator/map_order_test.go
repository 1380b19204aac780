package evaluator_test

import (
	"testing"
)

// A comprehension over a map an expression built iterates it in key order, as it does the
// input's maps: Go's random map order gave `variables.allowed.map(k, k).join(', ')` a
// different message on every run, and `m.map(k, k)[0]` a different decision (issue #15,
// tester atk7 finding 6). DESIGN.md §3.3: same input, same decision.
func TestMapsBuiltAtRunTimeIterateInKeyOrder(t *testing.T) {
	c := newCompiler(t)
	const letters = "{'j': 1, 'c': 1, 'h': 1, 'a': 1, 'f': 1, 'e': 1, 'i': 1, 'b': 1, 'g': 1, 'd': 1}"
	for _, tc := range []struct{ name, variable, message, want string }{
		{"literal", letters, "variables.m.map(k, k).join(',')", "a,b,c,d,e,f,g,h,i,j"},
		{"two-variable", letters, "variables.m.transformList(k, v, k + string(v)).join(',')", "a1,b1,c1,d1,e1,f1,g1,h1,i1,j1"},
		{"transformMap", letters + ".transformMap(k, v, v + 1)", "variables.m.map(k, k).join(',')", "a,b,c,d,e,f,g,h,i,j"},
		{"dyn keys", "{dyn('b'): 1, dyn(2): 1, dyn('a'): 1, dyn(1): 1, dyn(true): 1, dyn(false): 1}", "variables.m.map(k, k == true ? 't' : k == false ? 'f' : k == 1 ? '1' : k == 2 ? '2' : k == 'a' ? 'a' : 'b').join(',')", "f,t,1,2,a,b"},
		{"inline", "0", letters + ".filter(k, k != 'e').join(',')", "a,b,c,d,f,g,h,i,j"},
	} {
		p := newPolicy("p", variable("m", tc.variable), skipRule("r", "true", "R", "m", tc.message))
		set := setOf(t, c, p)
		for range 20 {
			if d := decide(set, pooledAuto()); d.Message != tc.want {
				t.Errorf("%s: message %q, want %q every time", tc.name, d.Message, tc.want)
				break
			}
		}
	}
}

package evaluator_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// termChainPolicy is a policy of up to 64 skip rules, each an OR of term of at most n
// characters, as many as fit in MaxPolicySourceBytes.
func termChainPolicy(term string, n int) *v1alpha1.ClusterIPAMPolicy {
	chain := term
	for len(chain)+4+len(term) <= n {
		chain += " || " + term
	}
	var opts []policyOption
	for i := 0; i < 64 && (i+1)*len(chain) <= evaluator.MaxPolicySourceBytes; i++ {
		opts = append(opts, skipRule(fmt.Sprintf("r%d", i), chain, "X", "m", ""))
	}
	return newPolicy("p", opts...)
}

// worstTerms are the terms whose OR chains cost the type checker most per character
// (issue #15): generic operations on dyn, map literals, optional indexes, map lookups, and
// an operator of many overloads.
var worstTerms = []struct{ name, term string }{
	{"dynplus", "dyn(1)+dyn(2)==dyn(3)"},
	{"map", "{'a': dyn(1), 'b': dyn('x')}['a']==dyn(1)"},
	{"optidx", "vm.labels[?'a'].orValue('')=='b'"},
	{"labels", "vm.labels['k1'] == 'abcdefgh'"},
	{"less", "1 < 2"},
	{"optof", "optional.of(1).hasValue()"},
	{"optnone", "optional.none().orValue(1) == 1"},
	{"optor", "optional.of(1).or(optional.none()).hasValue()"},
	{"indyn", "1 in [1,dyn(1)]"},
}

// BenchmarkCompileWorstCase compiles the policies of 64 KiB of the costliest terms to check,
// in chains of the CRD's 5,120 characters and of 1 KiB (admitted or refused for
// MaxPolicyCheckWork: what the webhook spends either way). docs/CEL-LIBRARY.md quotes it.
func BenchmarkCompileWorstCase(b *testing.B) {
	c := newCompiler(b)
	for _, t := range worstTerms {
		for _, n := range []int{5120, 1024} {
			p := termChainPolicy(t.term, n)
			b.Run(fmt.Sprintf("%s/%d", t.name, n), func(b *testing.B) {
				start := cpuNow(b)
				for b.Loop() {
					c.Compile(p, nil)
				}
				reportCPU(b, start)
			})
		}
	}
}

// refusedChainPolicy is one expression refused for its cost whose operand is costly to check
// (m terms of dyn arithmetic) under a chain of d member calls: the refusal's hint probed each
// call's operand, checking it again d times (issue #15, tester atk12 finding 2).
func refusedChainPolicy(m, d int) *v1alpha1.ClusterIPAMPolicy {
	terms := make([]string, m)
	for i := range terms {
		terms[i] = fmt.Sprintf("dyn(%d)+dyn(%d)==dyn(%d)", i, i+1, i+2)
	}
	expr := "(" + strings.Join(terms, " || ") + " ? 'a' : 'b')" + strings.Repeat(".lowerAscii()", d) + " == 'a'"
	return newPolicy("p", matchCondition("m", expr))
}

// BenchmarkCompileRefusedChain is the refused chain's compile (4.3–5.6 s of CPU before its
// hint drew on an allowance).
func BenchmarkCompileRefusedChain(b *testing.B) {
	c := newCompiler(b)
	for _, d := range []int{0, 25} {
		p := refusedChainPolicy(140, d)
		b.Run(fmt.Sprintf("calls=%d", d), func(b *testing.B) {
			start := cpuNow(b)
			for b.Loop() {
				c.Compile(p, nil)
			}
			reportCPU(b, start)
		})
	}
}

// reportCPU reports the CPU time per operation since start (processCPU), in ms, the
// garbage collector's share included: on a loaded machine the wall time says little.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuNow(b)-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}

// cpuNow is the CPU time (user and system) the process has used so far.
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

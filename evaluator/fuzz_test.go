package evaluator_test

import (
	"context"
	"flag"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// fuzzing is what every fuzzing process builds once.
type fuzzing struct {
	compiler *evaluator.Compiler
	builtin  *v1alpha1.ClusterIPAMPolicy
	fallback *evaluator.Policy
}

var fuzzEnv = sync.OnceValue(func() fuzzing {
	c, err := evaluator.NewCompiler(evaluator.DefaultLimits)
	if err != nil {
		panic(err)
	}
	b, err := policies.Builtin()
	if err != nil {
		panic(err)
	}
	fallback, errs := c.Compile(b, b)
	if len(errs) > 0 {
		panic(errs.ToAggregate())
	}
	return fuzzing{c, b, fallback}
})

// fuzzSlots are the places of the default policy a fuzzed string goes into.
var fuzzSlots = []func(p *v1alpha1.ClusterIPAMPolicy, i int, s string){
	func(p *v1alpha1.ClusterIPAMPolicy, i int, s string) {
		p.Spec.Variables[i%len(p.Spec.Variables)].Expression = s
	},
	func(p *v1alpha1.ClusterIPAMPolicy, i int, s string) {
		p.Spec.Variables[i%len(p.Spec.Variables)].Name = s
	},
	func(p *v1alpha1.ClusterIPAMPolicy, i int, s string) {
		p.Spec.MatchConditions = append(p.Spec.MatchConditions, v1alpha1.NamedExpression{Name: "fuzz", Expression: s})
	},
	func(p *v1alpha1.ClusterIPAMPolicy, _ int, s string) {
		p.Spec.Allocation = &v1alpha1.Expression{Expression: s}
	},
	func(p *v1alpha1.ClusterIPAMPolicy, i int, s string) {
		p.Spec.SkipRules[i%len(p.Spec.SkipRules)].Expression = s
	},
	func(p *v1alpha1.ClusterIPAMPolicy, i int, s string) {
		p.Spec.SkipRules[i%len(p.Spec.SkipRules)].MessageExpression = s
	},
	func(p *v1alpha1.ClusterIPAMPolicy, i int, s string) {
		p.Spec.SkipRules[i%len(p.Spec.SkipRules)].Reason = s
	},
	func(p *v1alpha1.ClusterIPAMPolicy, _ int, s string) { p.Spec.Hotplug.Expression = s },
	func(p *v1alpha1.ClusterIPAMPolicy, _ int, s string) {
		p.Spec.Match.VMSelector = &metav1.LabelSelector{MatchLabels: map[string]string{s: s}}
	},
}

// FuzzCompileAndDecide puts a random string into one field of the default policy, compiles
// it as new and as stored, and decides a random interface with it: nothing may panic, and a
// decision must keep the evaluator's invariants.
func FuzzCompileAndDecide(f *testing.F) {
	for i, e := range fuzzSeeds(fuzzEnv().builtin) {
		for _, slot := range []int{i, i + len(fuzzSlots)/2} {
			f.Add(uint8(slot%len(fuzzSlots)), uint8(i), e, "vm-a", "app", "10.0.0.5", int64(i), uint8(i*37))
		}
	}
	f.Fuzz(func(t *testing.T, slot, index uint8, expr, name, label, address string, ifIndex int64, flags uint8) {
		env := fuzzEnv()
		c, builtin := env.compiler, env.builtin
		p := builtin.DeepCopy()
		p.Name = "fuzz"
		fuzzSlots[int(slot)%len(fuzzSlots)](p, int(index), expr)
		compiled, errs := c.Compile(p, nil)
		if _, storedErrs := c.Compile(p, builtin); len(storedErrs) > len(errs) {
			t.Errorf("stored compile has more errors (%v) than new (%v)", storedErrs, errs)
		}
		if refused(t, errs) {
			return
		}
		set := evaluator.NewSet([]*evaluator.Policy{compiled}, env.fallback)
		in := fuzzInput(name, label, address, ifIndex, flags)
		var d evaluator.Decision
		abandonedBefore := evaluator.Abandoned()
		elapsed, allocated := measure(func() {
			d = set.Decide(context.Background(), in, evaluator.Options{Explain: flags&1 == 1})
		})
		checkInvariants(t, d)
		// An abandoned evaluation runs on in the background: one admitted policy whose call
		// cannot be interrupted would pile them up (and stalled a fuzzing run once), so it is
		// a failure, not something to wait out.
		if n := evaluator.Abandoned() - abandonedBefore; n > 0 {
			t.Fatalf("an admitted policy's evaluation was abandoned (%d): %q in slot %d", n, expr, slot)
		}
		// The deadlines bound the work whatever a policy is. Only under -fuzz: unit tests
		// assert no timings.
		if underFuzz() && elapsed > maxDecideCPU {
			t.Errorf("an admitted policy took %v of CPU (at most %v): %q in slot %d", elapsed, maxDecideCPU, expr, slot)
		}
		if underFuzz() && allocated > maxDecideAllocation {
			t.Errorf("an admitted policy allocated %d bytes (at most %d): %q in slot %d", allocated, maxDecideAllocation, expr, slot)
		}
	})
}

// maxDecideAllocation bounds what one Decide of an admitted policy may allocate in all: what one
// expression builds is charged by its size (strings a unit per ten characters, lists per ten
// elements copied), so the per-call limit bounds each value and the deadlines the number of
// calls; a runaway allocation (a call that builds without a charge) passes it within a call.
const maxDecideAllocation = 1 << 30

// underFuzz reports whether the test binary runs with -test.fuzz (not its seeds as unit tests).
func underFuzz() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// measure runs fn and returns the CPU time the process spent meanwhile (user + system, all
// threads: the evaluation, the garbage collector, anything abandoned) and the bytes
// allocated meanwhile (all goroutines). CPU time, not wall time: the fuzzer shares the
// machine, and a starved process's wall time says nothing about the work an admitted
// policy can cause; on the idle reference machine the two agree. It reads runtime/metrics,
// not runtime.ReadMemStats, which stops the world and so waits for every goroutine to reach
// a safe point — an abandoned evaluation in a long library call included.
func measure(fn func()) (time.Duration, uint64) {
	m := measured(fn)
	return m.cpu, m.allocated
}

// measurement is what measured saw of one call.
type measurement struct {
	cpu, wall time.Duration
	allocated uint64
}

// measured is measure with the wall time too; zero unless fuzzing.
func measured(fn func()) measurement {
	if !underFuzz() {
		fn()
		return measurement{}
	}
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	before := sample[0].Value.Uint64()
	start, wall := cpuTime(), time.Now()
	fn()
	m := measurement{cpu: cpuTime() - start, wall: time.Since(wall)}
	metrics.Read(sample)
	m.allocated = sample[0].Value.Uint64() - before
	return m
}

// cpuTime is the process's CPU time so far (getrusage(2), RUSAGE_SELF).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// refused reports whether the policy was refused, checking that every error names its field.
func refused(t *testing.T, errs field.ErrorList) bool {
	t.Helper()
	for _, e := range errs {
		if e.Field == "" {
			t.Errorf("error without a field path: %v", e)
		}
	}
	return len(errs) > 0
}

func checkInvariants(t *testing.T, d evaluator.Decision) {
	t.Helper()
	switch d.Allocation {
	case evaluator.AllocationAuto, evaluator.AllocationStatic, evaluator.AllocationNone:
		if d.Reason == evaluator.ReasonPolicyError && d.Rule == "" {
			t.Errorf("an evaluation error yielded allocation %q: %+v", d.Allocation, d)
		}
	case evaluator.AllocationUnknown:
		if !d.Skip || d.Reason != evaluator.ReasonPolicyError || len(d.Trace.Errors) == 0 {
			t.Errorf("unknown allocation without a PolicyError skip: %+v", d)
		}
	default:
		t.Errorf("allocation %q outside the enum", d.Allocation)
	}
	if d.Skip && d.Reason == "" {
		t.Errorf("skip without a reason: %+v", d)
	}
}

func fuzzInput(name, label, address string, index int64, flags uint8) evaluator.Input {
	bit := func(n uint) bool { return flags&(1<<n) != 0 }
	in := pooledAuto()
	in.VM.Name, in.VM.Labels = name, map[string]string{label: name}
	in.Interface.Index, in.Interface.Name = index, name
	in.Network.Exists, in.Network.Ready, in.Network.IPAMEnabled = bit(1), bit(2), bit(3)
	in.IPAddress.Address, in.IPAddress.Allocated = address, bit(4)
	if bit(5) {
		in.Interface.IPAddressName = label
	}
	if bit(6) {
		in.Holders = evaluator.Holders{VMs: []string{name, label}, Holder: label}
	}
	in.Change.VMRunning = bit(7)
	return in
}

// fuzzSeeds are the default policy's own expressions and a few that probe the edges.
func fuzzSeeds(p *v1alpha1.ClusterIPAMPolicy) []string {
	seeds := []string{
		"", "true", "1/0", "dyn(1)", "dyn('Auto')", "variables", "variables.static", "variables.nope",
		"namespaceObject.labels['env'] == 'prod'", "vm.labels[?'app'].orValue('') == 'web'",
		"cidr('10.0.0.0/8').containsIP(ip(ipAddress.address))", "isIP(ipAddress.address)",
		"holders.vms.all(a, holders.vms.exists(b, a == b))", "vm.name.split(',').all(a, true)",
		"[1, 2, 3].map(x, x * interface.index).size() > 0", "interface.index * 9223372036854775807 > 0",
		"'%s %d'.format([vm.name, interface.index])", "vm.creationTimestamp + duration('1h') > now",
		"((((((((((true))))))))))", "vm.labels.map(k, k + vm.labels[k])", "{'a': 1}.all(k, v, v == 1)",
		"string(interface.index) + vm.name", "ipAddress.address.matches('^10\\\\.')", "b'\\xff' == b''",
		"vm.labels.all(a, vm.labels.all(b, a == b || a != b))", "['corp', 'x'].includes(interface.name)",
		"type(interface.index) == int", "variables.static + variables.static", "dyn([1, 2] + [3] + [4, 5])",
		"'line\\nbreak; item'", "vm.annotations.exists(k, vm.annotations[k].contains(vm.name))",
		// Every library with extreme literals: value-sized work must be refused or bounded.
		"quantity('1e9999999') == quantity('1')", "quantity('1e-9999999').asApproximateFloat() > 0.0",
		"isQuantity('9'.repeat(1))", "quantity('1e64').add(quantity('1e-64')).isInteger()",
		"'%.9999999f'.format([1e308])", "'%.100e'.format([1e308]) + '%b %x %o %X'.format([-1, b'x', 8, 'y'])",
		"lists.range(1000000).size() > 0", "[[1], [[2]]].flatten(1000000)", "lists.range(1000).map(i, '%f'.format([1.0]))",
		"semver('99999999999999999999.0.0').major()", "url('https://' + vm.name).getHost()", "ip('::ffff:1.2.3.4').family()",
		"cidr('::/0').masked().containsCIDR('1::/128')", "vm.name.matches('(a{1000}){1000}')", "strings.quote(vm.annotations['x'])",
		"format.named('dns1123Subdomain').value().validate(vm.name).hasValue()", "vm.name.replace('', vm.name)",
		"vm.name.split('').join(vm.name)", "sets.contains(vm.labels.map(k, k), holders.vms)", "duration('2562047h') + duration('1ns')",
		"timestamp('9999-12-31T23:59:59Z') + duration('1s')", "int('9223372036854775807') + 1", "double('1e308') * 10.0",
		"has(vm.labels) && has(namespaceObject.labels)", "lists.range(1024).all(i, holders.vms.all(v, v != ''))",
	}
	for _, v := range p.Spec.Variables {
		seeds = append(seeds, v.Name, v.Expression)
	}
	if p.Spec.Allocation != nil {
		seeds = append(seeds, p.Spec.Allocation.Expression)
	}
	for _, r := range p.Spec.SkipRules {
		seeds = append(seeds, r.Expression, r.MessageExpression, r.Reason)
	}
	return seeds
}

package evaluator_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// hostile are the expressions of the recorded attacks on the policy engine (issue #15, testers
// atk1–atk21, docs/RELIABILITY.md's fuzzer findings) and of the tests that pinned the deleted
// estimate corrections and re-charges: each once did work its charge did not show, or ran into
// the deadline. On hostileInput (every field read at its declared bound) none may stall
// anything: whatever each decides, an evaluation answers by its deadline and a quarter
// without being abandoned, and a failure is a PolicyError.
var hostile = []string{
	// Quadratic cel-go cost tracker: long comprehensions, logical chains and literals in them.
	"lists.range(24996).all(i, true)",
	"lists.range(512).all(i, " + strings.TrimSuffix(strings.Repeat("true && ", 600), " && ") + ")",
	"lists.range(38).all(i, [" + strings.TrimSuffix(strings.Repeat("i, ", 2480), ", ") + "].size() > 0)",
	"lists.range(250).exists(i, [" + strings.TrimSuffix(strings.Repeat("1,", 50), ",") + "].transformMap(k, v, v + i).size() == 0)",
	// Strings charged as constant or per traversal while their work grows with the value.
	"lists.range(500).exists(i, vm.annotations['a'].charAt(i) == '#')",
	"vm.annotations['a'].indexOf(vm.annotations['b']) >= 0",
	"lists.range(500).exists(i, vm.annotations['a'].indexOf('ab' + string(i)) >= 0)",
	"lists.range(10).exists(i, size(vm.annotations['a'].split('')) < 0)",
	"size(vm.annotations['a'].replace('', vm.annotations['b'])) < 0",
	"size(vm.annotations['a'].replace('a', vm.annotations['b'])) < 0",
	"lists.range(100).exists(i, strings.quote(vm.annotations['a']) == '')",
	"vm.annotations.exists(k, vm.annotations[k].size() > 300000)",
	"lists.range(500).exists(i, duration(vm.annotations['d']) > duration('1s'))",
	"lists.range(500).exists(i, int(vm.annotations['n']) > 1)",
	"lists.range(500).exists(i, vm.annotations['a'] != 'z' && vm.annotations['a'] < 'a')",
	"lists.range(500).exists(i, vm.annotations['a'] in vm.labels)",
	"lists.range(500).exists(i, vm.labels[vm.annotations['a']] == 'x' && i < 0)",
	"lists.range(100).exists(i, vm.annotations['a'] in [vm.annotations['b'], vm.annotations['b']])",
	"lists.range(100).exists(i, [vm.annotations['a'], vm.annotations['a']] == [vm.annotations['b'], vm.annotations['b']])",
	"vm.annotations.map(k, vm.annotations[k]).join('') != ''",
	"holders.vms.map(h, vm.annotations['a']).join(',').size() > 0",
	"sets.intersects(holders.vms.map(h, vm.annotations['a']), holders.vms.map(h, vm.annotations['b']))",
	"lists.range(100).exists(i, holders.vms.sort()[0] == 'x')",
	// Parses whose work grows with the value (quantity, semver, URLs, IPs over zero-width spaces).
	"holders.vms.exists(x, quantity('1e-64').isInteger())",
	"lists.range(500).exists(i, quantity('1e64').add(quantity('1e-64')).isInteger())",
	"holders.vms.exists(x, isSemver(vm.annotations['v']))",
	"holders.vms.exists(x, isIP(vm.annotations['z']) || isCIDR(vm.annotations['z']) || isURL(vm.annotations['z']))",
	"holders.vms.exists(x, cidr('::/0').containsIP(vm.annotations['z']))",
	"holders.vms.exists(h, url('https://' + h + '/x?y=z').getQuery().size() > 0)",
	"holders.vms.exists_one(x0, isIP(vm.name))",
	// format(): precision, float clauses, output.
	"lists.range(500).exists(i, '%f'.format([1.0]) == '')",
	"'%s %s %s %s'.format([vm.annotations, vm.annotations, vm.annotations, vm.annotations]) != ''",
	"vm.labels.map(k, '%s'.format([vm.annotations])).size() > 0",
	// Regexes: programs and inputs.
	"vm.annotations['a'].matches('(a|b){40}c')",
	"lists.range(500).exists(i, vm.annotations['a'].matches('[a-z]{200}x'))",
	"lists.range(500).exists(i, vm.annotations['a'].findAll('a').size() < 0)",
	"lists.range(500).exists(i, format.uri().validate(vm.annotations['a']).hasValue())",
	// Deep operations on values built to be large for a small charge.
	"[[1, 2]]" + strings.Repeat(".map(x, [x, x])", 20) + " == [[1, 2]]" + strings.Repeat(".map(x, [x, x])", 20),
	"holders.vms.map(k, [k, k]).map(x, [x, x]).map(y, [y, y]).exists(z, [z] == holders.vms.map(k, [k, k]).map(x, [x, x]).map(y, [y, y]))",
	"lists.range(60).map(i, lists.range(59).map(j, j == 58 ? i : j)).distinct().size() == 1",
	"optional.of(vm.labels) in [optional.of(vm.labels), optional.of(vm.annotations)]",
	"(holders.vms + holders.vms + holders.vms + holders.vms).exists(x, x in (holders.vms + holders.vms + holders.vms))",
	// Time zones loaded on every call.
	"lists.range(500).exists(i, vm.creationTimestamp.getHours('Nowhere/Zone') == 25)",
	"lists.range(500).exists(i, vm.creationTimestamp.getHours(vm.labels[?'tz'].orValue('tzdata.zi')) == 25)",
}

// hostileInput fills every field the corpus reads to its declared bound: 256 labels and
// holders of their longest names, annotation values of 256 KiB (a and b equal but for their
// last character, z of zero-width spaces, v a version past semver()'s bound, d durations, n
// digits).
func hostileInput() evaluator.Input {
	in := fullInput(pooledAuto())
	long := strings.Repeat("a", 256<<10-1)
	in.VM.Annotations = map[string]string{
		"a": long + "a", "b": long + "b", "z": strings.Repeat("\u200b", 87_000),
		"v": "0.0.0-" + strings.TrimSuffix(strings.Repeat("a.", 128<<10-4), "."),
		"d": strings.Repeat("0s", 128<<10), "n": strings.Repeat("9", 256<<10),
	}
	return in
}

// Every recorded hostile policy, as one skip rule and as 64 rules evaluating it, decides or
// fails with a PolicyError by the deadline and its grace, never abandoned, under Fail and
// under Ignore. The deadline is lowered so the corpus runs in seconds; the bound is the
// same at any deadline (a call cel-go cannot interrupt is bounded by a guard). A run starved
// past the grace by the machine's load may be abandoned: each gets three tries.
func TestHostilePoliciesCannotStall(t *testing.T) {
	c := compilerWith(t, evaluator.Limits{Deadline: 200 * time.Millisecond})
	in := hostileInput()
	for i, expr := range hostile {
		for _, fp := range []v1alpha1.FailurePolicy{v1alpha1.FailurePolicyFail, v1alpha1.FailurePolicyIgnore} {
			for _, n := range []int{1, 64} {
				p := hostilePolicy(expr, n, fp)
				compiled, errs := c.Compile(p, nil)
				if len(errs) > 0 {
					continue // refused when written: nothing runs
				}
				set := evaluator.NewSet([]*evaluator.Policy{compiled}, fuzzEnv().fallback)
				if !decidesWithoutAbandoning(t, set, in) {
					t.Errorf("hostile[%d] (%d rules, %s) was abandoned three times: %.200s", i, n, fp, expr)
				}
			}
		}
	}
}

// hostilePolicy is a policy of n skip rules that each evaluate expr and never fire.
func hostilePolicy(expr string, n int, fp v1alpha1.FailurePolicy) *v1alpha1.ClusterIPAMPolicy {
	var opts []policyOption
	for i := range n {
		opts = append(opts, skipRule(fmt.Sprint("r", i), fmt.Sprintf("(%s) && false", expr), "Hostile", "m", ""))
	}
	p := newPolicy("hostile", opts...)
	p.Spec.FailurePolicy = fp
	return p
}

// decidesWithoutAbandoning decides in with set up to three times, checking the decision's
// invariants; true as soon as an evaluation is not abandoned.
func decidesWithoutAbandoning(t *testing.T, set *evaluator.Set, in evaluator.Input) bool {
	t.Helper()
	for range 3 {
		before := evaluator.Abandoned()
		checkInvariants(t, decide(set, in))
		if evaluator.Abandoned() == before {
			return true
		}
	}
	return false
}

// BenchmarkHostilePolicies decides each hostile policy (64 rules, Fail) at the default limits
// on hostileInput and reports the most CPU and wall time one Decide took and how many
// evaluations were abandoned: the figures of docs/PROTECTION.md's "cannot stall".
func BenchmarkHostilePolicies(b *testing.B) {
	c := newCompiler(b)
	in := hostileInput()
	var sets []*evaluator.Set
	for _, expr := range hostile {
		if compiled, errs := c.Compile(hostilePolicy(expr, 64, v1alpha1.FailurePolicyFail), nil); len(errs) == 0 {
			sets = append(sets, evaluator.NewSet([]*evaluator.Policy{compiled}, fuzzEnv().fallback))
		}
	}
	before := evaluator.Abandoned()
	var maxCPU, maxWall time.Duration
	for b.Loop() {
		for _, set := range sets {
			start, wall := cpuTime(), time.Now()
			decide(set, in)
			maxCPU, maxWall = max(maxCPU, cpuTime()-start), max(maxWall, time.Since(wall))
		}
	}
	b.ReportMetric(float64(len(sets)), "admitted")
	b.ReportMetric(maxCPU.Seconds()*1000, "max-cpu-ms")
	b.ReportMetric(maxWall.Seconds()*1000, "max-wall-ms")
	b.ReportMetric(float64(evaluator.Abandoned()-before), "abandoned")
}

// vmBudget is the controller's DefaultVMEvaluationBudget (controller/vm), which the evaluator
// cannot import: the wall time one reconcile may spend deciding all of a VM's interfaces.
const vmBudget = 2 * time.Second

// BenchmarkHostilePoliciesPerVM decides four interfaces with each hostile policy (64 rules,
// Fail), one after the other under one context of vmBudget, as a reconcile does, and reports
// the most CPU and wall time one VM took: docs/PROTECTION.md's CPU budget per VM reconcile.
func BenchmarkHostilePoliciesPerVM(b *testing.B) {
	c := newCompiler(b)
	in := hostileInput()
	var sets []*evaluator.Set
	for _, expr := range hostile {
		if compiled, errs := c.Compile(hostilePolicy(expr, 64, v1alpha1.FailurePolicyFail), nil); len(errs) == 0 {
			sets = append(sets, evaluator.NewSet([]*evaluator.Policy{compiled}, fuzzEnv().fallback))
		}
	}
	var maxCPU, maxWall time.Duration
	for b.Loop() {
		for _, set := range sets {
			start, wall := cpuTime(), time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), vmBudget)
			for range 4 {
				set.Decide(ctx, in, evaluator.Options{})
			}
			cancel()
			maxCPU, maxWall = max(maxCPU, cpuTime()-start), max(maxWall, time.Since(wall))
		}
	}
	b.ReportMetric(maxCPU.Seconds()*1000, "max-vm-cpu-ms")
	b.ReportMetric(maxWall.Seconds()*1000, "max-vm-wall-ms")
}

// The fixtures of testdata/hostile, for the controller's specs of a policy failing on a running
// VM, are admitted and fail on an ordinary interface each for its own reason: the per-call cost
// limit, the deadline, a run-time type error. Each failure is a PolicyError of the policy with
// AllocationUnknown, and only the deadline's is DeadlineExceeded (which the controller retries
// before writing it).
func TestHostileFixturesAreAdmittedAndFailAsNamed(t *testing.T) {
	c := newCompiler(t)
	for _, tc := range []struct {
		file, message string
		late          bool
	}{
		{"cost-limit.yaml", "actual cost limit exceeded", false},
		{"deadline.yaml", "did not finish within the deadline", true},
		{"type-error.yaml", "no such overload", false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "hostile", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			docs, err := policies.Decode(data)
			if err != nil || len(docs) != 1 {
				t.Fatalf("Decode: %d policies, %v", len(docs), err)
			}
			compiled, errs := c.Compile(&docs[0], nil)
			if len(errs) > 0 {
				t.Fatalf("refused: %v", errs.ToAggregate())
			}
			set := evaluator.NewSet([]*evaluator.Policy{compiled}, fuzzEnv().fallback)
			var d evaluator.Decision
			abandoned := true // the run-time bounds, not the grace, must stop it (a starved run may be abandoned: three tries)
			for try := 0; try < 3 && abandoned; try++ {
				before := evaluator.Abandoned()
				d = decide(set, fuzzInput("vm-a", "app", "10.0.0.5", 1, 0xff))
				abandoned = evaluator.Abandoned() != before
			}
			if abandoned {
				t.Error("abandoned three times: a call the guards do not bound")
			}
			if d.Reason != evaluator.ReasonPolicyError || d.Policy != docs[0].Name || d.Allocation != evaluator.AllocationUnknown {
				t.Fatalf("decided %s by %q with %s (%s), want a PolicyError of %s", d.Reason, d.Policy, d.Allocation, d.Message, docs[0].Name)
			}
			if !strings.Contains(d.Message, tc.message) || d.DeadlineExceeded != tc.late {
				t.Errorf("message %q (DeadlineExceeded %t), want %q (%t)", d.Message, d.DeadlineExceeded, tc.message, tc.late)
			}
		})
	}
}

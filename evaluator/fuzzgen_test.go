package evaluator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// FuzzGeneratedPolicy builds a well-typed expression from the fuzzer's bytes with a small
// grammar of what a careless or hostile admin writes — nested comprehensions over the input
// and over literal ranges, concatenations, every library of the environment with extreme
// literals — puts it into one part of the default policy and decides an interface, on a
// normal input and on one filled to the declared bounds. Where FuzzCompileAndDecide's
// byte-level mutations mostly yield expressions that do not type-check, every expression
// here does, so the fuzzer's time goes into what the limits must stop.
//
// It asserts what the run-time bounds promise (docs/PROTECTION.md): no panic, the evaluator's
// invariants, no abandoned evaluation (every call cel-go cannot interrupt is bounded by a
// guard, far within Decide's grace), and under -fuzz compiling within a second, each Decide
// within its deadlines in CPU time, and bounded allocation; and that deciding again gives the
// same decision unless a run ran into the wall-clock deadline.
func FuzzGeneratedPolicy(f *testing.F) {
	for _, seed := range [][]byte{
		{}, {0}, {1, 2, 3, 4, 5, 6, 7, 8}, {9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9},
		[]byte("comprehension over the labels of a full input"), []byte{3, 0, 3, 0, 3, 0, 3, 0, 1, 7, 200},
		[]byte{255, 254, 253, 252, 251, 250, 249, 248, 247, 246, 245, 244, 243, 242, 241, 240},
	} {
		f.Add(seed, uint8(0))
		f.Add(seed, uint8(0x81))
	}
	// The attack of issue #15 (F4): 64 rules, each a regex in a comprehension over a literal
	// range, every estimate just under its limit; it decided differently run to run.
	f.Add([]byte{17, 3, 2, 0, 4, 0, 1, 3}, uint8(0x30))
	f.Add([]byte{17, 3, 3, 0, 4, 0, 9, 8}, uint8(0xb0))
	// 65 rules of sets.contains of two chains of 9 list levels (1.3 s to type-check at 13,
	// now refused before the checker), and of 8 (the deepest admitted); an element compared
	// with a whole chain of the labels on every iteration, on a full input (issue #15).
	f.Add([]byte{17, 1, 0, 6, 7}, uint8(0x30))
	f.Add([]byte{17, 1, 0, 5, 7}, uint8(0x30))
	f.Add([]byte{17, 1, 1, 2, 8}, uint8(0x82))
	// The wide shapes: 4,081 `&&` terms, and a literal of 2,481 reads, in a comprehension over
	// 400 elements; ten variables, each the one before doubled, over the holders; a map literal
	// of 17 keys, iterated (Go's random map order decided it differently run to run).
	for _, seed := range [][]byte{{18, 3, 2, 0, 250, 255, 1}, {18, 3, 2, 0, 250, 8, 1}, {18, 3, 2, 0, 252, 155, 6},
		{18, 3, 2, 0, 252, 7, 6}, {255, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {255, 2, 0, 1, 2, 3, 4, 0}, {253, 1, 2}} {
		f.Add(seed, uint8(0))
		f.Add(seed, uint8(0x80))
	}
	f.Fuzz(func(t *testing.T, program []byte, flags uint8) {
		g := &exprGen{in: program}
		expr := g.boolean(0)
		env := fuzzEnv()
		p := env.builtin.DeepCopy()
		p.Name = "fuzz"
		placeGenerated(p, flags, expr, g)
		var compiled *evaluator.Policy
		var errs field.ErrorList
		// The webhook compiles what an admin writes: compiling must be fast whatever it is.
		if took, _ := measure(func() { compiled, errs = env.compiler.Compile(p, nil) }); underFuzz() && took > scaled(t, maxCompileTime) {
			t.Errorf("compiling took %v (at most %v, scaled by this binary's slowdown %.1f×): %q", took, scaled(t, maxCompileTime), slowdown(t), expr)
		}
		if refused(t, errs) {
			return
		}
		set := evaluator.NewSet([]*evaluator.Policy{compiled}, env.fallback)
		in := fuzzInput("vm-a", "app", "10.0.0.5", 1, flags)
		if flags&0x80 != 0 {
			in = fullInput(in)
		}
		decide := func() evaluator.Decision {
			var d evaluator.Decision
			abandonedBefore := evaluator.Abandoned()
			m := measured(func() { d = set.Decide(context.Background(), in, evaluator.Options{}) })
			checkInvariants(t, d)
			if n := evaluator.Abandoned() - abandonedBefore; n > 0 {
				t.Fatalf("an admitted policy's evaluation was abandoned (%d): %q", n, expr)
			}
			if underFuzz() && m.cpu > maxDecideCPU {
				t.Errorf("an admitted policy took %v of CPU (at most %v: its deadlines, and the garbage collector): %q",
					m.cpu, maxDecideCPU, expr)
			}
			if underFuzz() && m.allocated > maxDecideAllocation {
				t.Errorf("an admitted policy allocated %d bytes (at most %d): %q", m.allocated, maxDecideAllocation, expr)
			}
			return d
		}
		first, second := decide(), decide()
		if late(first) || late(second) {
			return // the wall clock decided, not the policy: the two may differ
		}
		if a, b := summary(first), summary(second); a != b {
			t.Errorf("the same input decided differently:\n  %s\n  %s\nexpression %q", a, b, expr)
		}
	})
}

// maxDecideCPU bounds the CPU one Decide may take: up to three evaluations (the first, and
// two without a trial or Ignore policy that ran out of time), each stopped by its deadline
// (1 s) and answered by its grace (a quarter more), the calls that outlast it bounded by the
// guards; and the garbage collector's share beside them.
var maxDecideCPU = 2 * 3 * (evaluator.DefaultLimits.Deadline + evaluator.DefaultLimits.Deadline/4)

// maxCompileTime bounds one Compile under -fuzz: the admission webhook compiles every policy
// written, within its 5 s timeout (the chart's timeoutSeconds) and beside other requests.
const maxCompileTime = time.Second

// late: the deadline passed during d's evaluation, whether d failed for it or a trial
// policy was passed over for it (then only its trace says so).
func late(d evaluator.Decision) bool {
	for _, e := range append([]string{d.Message}, d.Trace.Errors...) {
		if strings.Contains(e, "deadline") {
			return true
		}
	}
	return false
}

// summary is what a decision says, for comparing two runs (the trace's timings differ).
func summary(d evaluator.Decision) string {
	return fmt.Sprintf("allocation=%s skip=%v reason=%s rule=%s policy=%s message=%q cost=%d",
		d.Allocation, d.Skip, d.Reason, d.Rule, d.Policy, d.Message, d.Cost)
}

// placeGenerated puts the generated bool expression into the part of p that flags choose,
// wrapped to the type that part wants.
func placeGenerated(p *v1alpha1.ClusterIPAMPolicy, flags uint8, expr string, g *exprGen) {
	p.Spec.Variables = append(p.Spec.Variables, g.variables...)
	switch flags % 5 {
	case 0:
		p.Spec.SkipRules[0].Expression = expr
	case 1:
		p.Spec.MatchConditions = append(p.Spec.MatchConditions, v1alpha1.NamedExpression{Name: "generated", Expression: expr})
	case 2:
		p.Spec.Allocation = &v1alpha1.Expression{Expression: fmt.Sprintf("(%s) ? 'Auto' : 'Pass'", expr)}
	case 3:
		p.Spec.SkipRules[0].Expression = "true"
		p.Spec.SkipRules[0].MessageExpression = g.str(0)
	default:
		p.Spec.Variables = append(p.Spec.Variables, v1alpha1.NamedExpression{Name: "generated", Expression: g.list(0)})
		p.Spec.SkipRules[0].Expression = "variables.generated.size() > 1000000"
	}
	if flags&0x40 != 0 {
		p.Spec.FailurePolicy = v1alpha1.FailurePolicyIgnore
	}
	if flags&0x20 != 0 {
		// Many rules that all evaluate it and never fire: the sum of the estimates and the
		// interface budget, not one call's limit, must stop the work before the deadline.
		n := 16 + 48*int(flags>>4&1)
		for i := range n {
			p.Spec.SkipRules = append(p.Spec.SkipRules, v1alpha1.SkipRule{Name: fmt.Sprint("generated-", i),
				Reason: "Generated", Message: "generated", Expression: fmt.Sprintf("(%s) != (%s)", expr, expr)})
		}
	}
}

// fullInput is in with every map and list the policies can read filled to its declared
// bound (evaluator/input.go), the worst input an estimate has to hold for; annotations total
// 256 KiB, the API server's limit.
func fullInput(in evaluator.Input) evaluator.Input {
	in.VM.Labels, in.Namespace.Labels, in.Network.Labels = map[string]string{}, map[string]string{}, map[string]string{}
	in.Holders.VMs = nil
	for i := range 256 {
		k := fmt.Sprintf("%s-%03d", strings.Repeat("k", 59), i)
		in.VM.Labels[k] = strings.Repeat("v", 63)
		in.Namespace.Labels[k] = strings.Repeat("n", 63)
		in.Network.Labels[k] = strings.Repeat("w", 63)
		in.Holders.VMs = append(in.Holders.VMs, fmt.Sprintf("%s-%03d", strings.Repeat("h", 249), i))
	}
	in.VM.Annotations = map[string]string{}
	for i := range 4 {
		in.VM.Annotations[fmt.Sprint("a", i)] = strings.Repeat("a", 64<<10-16)
	}
	in.VM.Annotations["a1"] = "0.0.0-" + strings.TrimSuffix(strings.Repeat("a.", 32<<10-16), ".") // a version, past semver()'s bound
	in.VM.Name = strings.Repeat("n", 253)
	return in
}

// exprGen turns bytes into a well-typed CEL expression. Each choice reads one byte (zero once
// the bytes run out, which picks the cheapest leaf), so the fuzzer's mutations map onto the
// expression's structure.
type exprGen struct {
	in []byte
	// scope are the comprehension variables in scope, innermost last: strings (x0, x1, …).
	scope []string
	// variables are the policy variables the expression reads (wide's chains), in order:
	// placeGenerated adds them to the policy.
	variables []v1alpha1.NamedExpression
}

const maxGenDepth = 4

func (g *exprGen) next() int {
	if len(g.in) == 0 {
		return 0
	}
	b := g.in[0]
	g.in = g.in[1:]
	return int(b)
}

// pick returns one of n choices; at the maximum depth only the first leaves choices (the
// ones that recurse come last in every list).
func (g *exprGen) pick(depth, leaves, n int) int {
	if depth >= maxGenDepth {
		return g.next() % leaves
	}
	return g.next() % n
}

// extremeInts are the integer literals that have made libraries misbehave.
var extremeInts = []string{"0", "1", "-1", "2", "255", "1024", "65536", "1000000", "9223372036854775807", "-9223372036854775808"}

// extremeStrings are string literals: empty, long, regex-hostile, not UTF-8 clean as text.
var extremeStrings = []string{
	"''", "'a'", "'10.0.0.1'", "'::ffff:1.2.3.4'", "'10.0.0.0/8'", "'1e64'", "'1Gi'", "';'", "','",
	"'" + strings.Repeat("a", 1024) + "'", "'%s%s%s%s'", "'\\u202e'", "'" + strings.Repeat("ab", 300) + "'",
}

// patterns are regex literals, from trivial to the largest the guards admit.
var patterns = []string{
	"'^a'", "'a*'", "'(a|b)*c'", "'[a-z]{200}x'", "'(a{1,100}){1,9}'", "'^(\\\\d+\\\\.){3}\\\\d+$'", "'.{256}'",
	"'(a|aa)+$'", "'" + strings.Repeat("(a|b)", 60) + "'",
}

func (g *exprGen) intLit() string { return extremeInts[g.next()%len(extremeInts)] }

func (g *exprGen) boolean(depth int) string {
	d := depth + 1
	if len(g.in) > 0 && g.in[0] >= wideShapes && depth < maxGenDepth {
		return g.wide(d, g.next()-wideShapes)
	}
	switch g.pick(depth, 4, 23) {
	case 0:
		return "true"
	case 1:
		return "has(vm.labels)"
	case 2:
		return "isIP(" + g.str(maxGenDepth) + ")"
	case 3:
		return "type(interface.index) == int"
	case 4:
		return g.str(d) + ".matches(" + patterns[g.next()%len(patterns)] + ")"
	case 5:
		return g.str(d) + ".contains(" + g.str(d) + ")"
	case 6:
		return g.integer(d) + " < " + g.integer(d)
	case 7:
		return "isCIDR(" + g.str(d) + ") && cidr(" + g.str(d) + ").containsIP('10.0.0.1')"
	case 8:
		return "isQuantity(" + g.str(d) + ")"
	case 9:
		return "quantity(" + []string{"'1e64'", "'1Ki'", "'999999999999999999'", "'1e-64'"}[g.next()%4] + ").isInteger()"
	case 10:
		return "sets.contains(" + g.list(d) + ", " + g.list(d) + ")"
	case 11:
		return "(" + g.boolean(d) + " && " + g.boolean(d) + ")"
	case 12:
		return "(" + g.boolean(d) + " || " + g.boolean(d) + ")"
	case 13:
		return "!" + g.boolean(d)
	case 14:
		return g.str(d) + ".startsWith(" + g.str(d) + ")"
	case 15:
		// One choice for the parsers that take any string: a new case would change what every
		// kept seed generates. Annotation a1 is a version of 32,000 pre-release identifiers in a
		// full input (semver's parse allocates per identifier: issue #15, atk10).
		s := g.str(d)
		return "(isURL(" + s + ") || isSemver(" + s + ") || isSemver(vm.annotations[?'a1'].orValue(''), true))"
	case 16:
		return g.str(d) + ".find(" + patterns[g.next()%len(patterns)] + ") != ''"
	case 17:
		return g.doubled(d)
	default: // comprehensions
		src := g.list(d)
		v := g.push()
		defer g.pop()
		macro := []string{"exists", "all", "exists_one"}[g.next()%3]
		return src + "." + macro + "(" + v + ", " + g.boolean(d) + ")"
	}
}

func (g *exprGen) integer(depth int) string {
	d := depth + 1
	switch g.pick(depth, 3, 10) {
	case 0:
		return g.intLit()
	case 1:
		return "interface.index"
	case 2:
		return "size(vm.name)"
	case 3:
		return "size(" + g.str(d) + ")"
	case 4:
		return g.list(d) + ".size()"
	case 5:
		return "(" + g.integer(d) + " + " + g.integer(d) + ")"
	case 6:
		return "(" + g.integer(d) + " * " + g.integer(d) + ")"
	case 7:
		return g.str(d) + ".indexOf(" + g.str(d) + ")"
	case 8:
		return "int(" + g.str(d) + ".size())"
	default:
		return "quantity('1Mi').compareTo(quantity('1Ki'))"
	}
}

func (g *exprGen) str(depth int) string {
	d := depth + 1
	leaves := 6 + len(g.scope)
	c := g.pick(depth, leaves, leaves+14)
	switch {
	case c == 0:
		return extremeStrings[g.next()%len(extremeStrings)]
	case c == 1:
		return "vm.name"
	case c == 2:
		return "interface.name"
	case c == 3:
		return "ipAddress.address"
	case c == 4:
		return "vm.annotations[?'a0'].orValue('')"
	case c == 5:
		return "namespaceObject.name"
	case c < leaves:
		return g.scope[c-6]
	}
	switch c - leaves {
	case 0:
		return "(" + g.str(d) + " + " + g.str(d) + ")"
	case 1:
		return g.str(d) + ".lowerAscii()"
	case 2:
		return g.str(d) + ".replace(" + g.str(d) + ", " + g.str(d) + ")"
	case 3:
		return "'%s-%s'.format([" + g.str(d) + ", " + g.list(d) + "])"
	case 4:
		return "strings.quote(" + g.str(d) + ")"
	case 5:
		return g.list(d) + ".join(" + g.str(d) + ")"
	case 6:
		return "string(" + g.integer(d) + ")"
	case 7:
		return g.str(d) + ".trim()"
	case 8:
		return "'%.2f %d %x'.format([1e308, " + g.integer(d) + ", " + g.str(d) + "])"
	case 9:
		return "ip('::ffff:1.2.3.4').string()"
	case 10:
		return g.str(d) + ".substring(0)"
	case 11:
		return "(" + g.boolean(d) + " ? " + g.str(d) + " : " + g.str(d) + ")"
	case 12:
		return g.str(d) + ".upperAscii()"
	default:
		return "url('https://' + " + g.str(d) + ").getHost()"
	}
}

// list is a list of strings.
func (g *exprGen) list(depth int) string {
	d := depth + 1
	switch g.pick(depth, 4, 12) {
	case 0:
		return "holders.vms"
	case 1:
		return "vm.labels.map(k, k)"
	case 2:
		return "['corp', 'tenant-b']"
	case 3:
		return "lists.range(" + []string{"0", "10", "400", "1024"}[g.next()%4] + ").map(i, string(i))"
	case 4:
		return "(" + g.list(d) + " + " + g.list(d) + ")"
	case 5:
		return g.str(d) + ".split(" + g.str(d) + ")"
	case 6:
		src := g.list(d)
		v := g.push()
		defer g.pop()
		return src + ".filter(" + v + ", " + g.boolean(d) + ")"
	case 7:
		src := g.list(d)
		v := g.push()
		defer g.pop()
		return src + ".map(" + v + ", " + g.str(d) + ")"
	case 8:
		return "vm.annotations.map(k, vm.annotations[k])"
	case 9:
		return "[" + g.str(d) + ", " + g.str(d) + "]"
	case 10:
		return g.list(d) + ".distinct()"
	default:
		return g.list(d) + ".sort()"
	}
}

// doubled is a deep operation on a list whose nesting reuses one inner list k times
// (.map(x, [x, x])): 2^k elements for a cost of ~k, issue #15 — on the whole value, and on
// each element against the whole (the estimate must charge the operands' deep size on every
// iteration). k ≤ 7 reaches one level past the 8 list levels an expression may build
// (maxTypeDepth); a literal nested up to 10 levels probes the same bound.
func (g *exprGen) doubled(depth int) string {
	if g.next()%4 == 0 {
		n := g.next()%10 + 1
		return strings.Repeat("[", n) + g.str(depth+1) + strings.Repeat("]", n) + " != []"
	}
	e := g.list(depth) + ".map(x, [x])"
	for k := g.next()%7 + 1; k > 0; k-- {
		e += ".map(x, [x, x])"
	}
	v := g.push()
	defer g.pop()
	return []string{
		e + ".exists(" + v + ", " + v + " == " + v + ")",
		e + " == " + e,
		"[" + e + "] != []",
		e + ".flatten().size() > 0",
		e + ".distinct().size() > 0",
		e + ".indexOf(" + e + "[0]) >= 0",
		e + ".exists(" + v + ", " + v + " in " + e + ")",
		"sets.contains(" + e + ", " + e + ")",
		e + ".exists(" + v + ", [" + v + "] == " + e + ")",
		e + ".exists(" + v + ", [" + v + "] in [" + e + "])",
		e + ".exists(" + v + ", (" + e + " + [" + v + "]).indexOf(" + v + ") < 0)",
	}[g.next()%11]
}

// wideShapes is the first choice byte of boolean that picks one of wide's shapes (250–255):
// the choices below it are as they were before wide, so that the kept seeds
// (testdata/fuzz) still generate the expressions they were found with.
const wideShapes = 250

// wide is one of the shapes whose work grows with their width, not their depth, on nodes
// cel-go charges little or nothing (issue #15): thousands of `&&`, `||` or `?:` terms, a long
// list or map literal of reads (each read searches the values pending beneath it), and a
// chain of policy variables, each built from the one before; and a map literal, iterated
// (its order must not vary).
func (g *exprGen) wide(depth, shape int) string {
	n := 1 + g.next()*16 // up to 4,081 terms
	switch shape {
	case 0, 1:
		op := []string{" && ", " || "}[shape]
		term := g.boolean(maxGenDepth)
		return "(" + strings.TrimSuffix(strings.Repeat(term+op, n), op) + ")"
	case 2:
		return "[" + strings.TrimSuffix(strings.Repeat(g.str(maxGenDepth)+", ", n), ", ") + "].size() > 0"
	case 3: // a map literal of n distinct keys, iterated: the decision shows its order
		v := g.str(maxGenDepth)
		entries := make([]string, min(n, 600))
		for i := range entries {
			entries[i] = fmt.Sprintf("'k%d': %s", (i*7919)%len(entries), v)
		}
		return "{" + strings.Join(entries, ", ") + "}.map(z, z)[0] == 'k1'"
	case 4:
		b, x := g.boolean(maxGenDepth), g.str(maxGenDepth)
		return strings.Repeat("("+b+" ? "+x+" : ", n) + "''" + strings.Repeat(")", n) + " != 'x'"
	default:
		return g.chain(depth, 1+n%12)
	}
}

// chain adds k policy variables, the first a generated list and each next built from the one
// before (doubled, mapped, filtered), and reads the last.
func (g *exprGen) chain(depth, k int) string {
	scope := g.scope
	g.scope = nil // a variable sees no comprehension variable
	defer func() { g.scope = scope }()
	base := len(g.variables)
	name := func(i int) string { return fmt.Sprintf("chain%d_%d", base, i) }
	first := name(0)
	g.variables = append(g.variables, v1alpha1.NamedExpression{Name: first, Expression: g.list(depth)})
	prev := first
	for i := 1; i < k; i++ {
		v := "variables." + prev
		expr := []string{v + " + " + v, v + ".map(y, y + y)", v + ".filter(y, y != vm.name)", "[" + v + ", " + v + "].flatten()",
			v + ".map(y, " + v + ".size())" + ".map(z, string(z))"}[g.next()%5]
		prev = name(i)
		g.variables = append(g.variables, v1alpha1.NamedExpression{Name: prev, Expression: expr})
	}
	last := "variables." + prev
	return []string{last + ".exists(y, y == vm.name)", last + " == " + last, last + ".join(',').size() > 0"}[g.next()%3]
}

// push brings a new comprehension variable into scope and returns its name.
func (g *exprGen) push() string {
	v := fmt.Sprint("x", len(g.scope))
	g.scope = append(g.scope, v)
	return v
}

func (g *exprGen) pop() { g.scope = g.scope[:len(g.scope)-1] }

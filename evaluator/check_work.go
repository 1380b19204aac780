package evaluator

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vmipam/vmipam/evaluator/internal/cost"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// MaxPolicyCheckWork bounds the type checker's work (cost.CheckWork, in type bindings copied)
// summed over a policy's expressions: it grows with the square of an expression's generic
// operations, and the webhook compiles each policy written within its timeout.
const MaxPolicyCheckWork = cost.MaxPolicyCheckWork

// CheckWorkAllowance is type-checking work (cost.CheckWork, in type bindings copied) that several
// compilations draw on together, beside each policy's own MaxPolicyCheckWork: the dry run
// compiles the candidate policies of one request within one, so that what a request costs to
// compile is bounded as a policy's is, not by how many policies it carries. It is not safe
// for concurrent use.
type CheckWorkAllowance struct {
	left, total uint64
	of          string
}

// NewCheckWorkAllowance is an allowance of total units of check work for what of names (a
// phrase, quoted when an expression is refused: "the candidate policies of a request").
func NewCheckWorkAllowance(total uint64, of string) *CheckWorkAllowance {
	return &CheckWorkAllowance{left: total, total: total, of: of}
}

// Spent is the check work the compilations within a have spent so far.
func (a *CheckWorkAllowance) Spent() uint64 { return a.total - a.left }

// CompileWithin is Compile drawing the type checker's work from shared too: an expression
// whose work exceeds what is left of its policy's MaxPolicyCheckWork or of shared is refused
// before it is checked (with the bound it would cross), and what the policy spends is taken
// from shared. With a nil shared it is Compile.
func (c *Compiler) CompileWithin(p, old *v1alpha1.ClusterIPAMPolicy, shared *CheckWorkAllowance) (*Policy, field.ErrorList) {
	cc := c.newCompilation(p, old, false)
	cc.shared = shared
	return c.compileWith(cc, p)
}

// checkAllowance is what the next expression of cc may spend: the least of what is left of
// the policy's MaxPolicyCheckWork and of the allowance it shares.
func (cc *compilation) checkAllowance() cost.Allowance {
	own := cost.PolicyAllowance(cc.checkWork)
	if cc.shared == nil || cc.shared.left >= own.Left {
		return own
	}
	return cost.Allowance{Left: cc.shared.left, Total: cc.shared.total, Of: cc.shared.of,
		Advice: "split long expressions into variables, or send fewer or smaller policies"}
}

// spendCheckWork adds work to the policy's account and takes it from the shared allowance.
func (cc *compilation) spendCheckWork(work uint64) {
	cc.checkWork = addSaturating(cc.checkWork, work)
	if cc.shared != nil {
		cc.shared.left -= min(work, cc.shared.left)
	}
}

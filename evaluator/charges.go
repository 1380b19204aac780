package evaluator

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// String functions whose charge did not match their implementation (cel-go's ext/strings v2,
// which Kubernetes pins, registers no cost of its own; the Kubernetes library charges by
// function name). Each is charged here for the work its implementation does, statically
// (stringCallEstimate) and at run time (stringCostTrackers), in the same formula:
//
//   - charAt converts the whole receiver to runes on every call: one traversal of the
//     receiver (it was charged 1: charAt(i) over a 256 KiB annotation took 1.3 ms and 1 MB);
//   - indexOf and lastIndexOf convert the receiver and compare the needle at every position:
//     one traversal plus receiver × needle × 0.1, cel-go's own formula from strings v5 (they
//     were charged one traversal);
//   - split and findAll build one string per part or match: one unit per possible part or
//     match, the receiver's length + 1 or the literal limit (they were charged the traversal
//     only: findAll('a') over 262,000 characters took ~100 ms for 26,000 units);
//   - replace builds a result that can be the receiver's length times the replacement's: one
//     unit per ten characters of the result on top of the library's two traversals, and the
//     result is bounded before it is built (replaceResultArg).
//
// The other functions of the strings library are linear and charged one traversal by the
// Kubernetes library (lowerAscii, upperAscii, trim, substring), by their result (join,
// format, ours) or by cel-go (strings.quote); the lists and sets extensions charge by their
// result and product sizes in cel-go itself (docs/CEL-LIBRARY.md).

// traversal is the cost of walking n characters once.
func traversal(n uint64) uint64 {
	return uint64(math.Ceil(float64(n) * common.StringTraversalCostFactor))
}

// searchCost is the charge of indexOf/lastIndexOf on a receiver of n and a needle of m
// characters.
func searchCost(n, m uint64) uint64 {
	return addSaturating(1+traversal(n), traversal(saturatingMul(n, max(m, 1))))
}

// partsBound bounds the parts or matches of a receiver of n characters with a limit
// argument (negative: none).
func partsBound(n uint64, limit int64) uint64 {
	if limit >= 0 && uint64(limit) < n+1 {
		return uint64(limit)
	}
	return addSaturating(n, 1)
}

// quantityParseCost is what parsing one quantity string costs on top of the library's
// charge: quantity() and isQuantity() were charged one traversal of their few characters
// (~1 unit) for ~8 µs of arbitrary-precision arithmetic at the guarded exponent bounds (±64),
// ~1.5 µs per unit against the ~0.35 µs the budgets are calibrated for, so that 64 rules of
// `holders.vms.exists(x, quantity('1e-64').isInteger())` reached the deadline at 196,000
// units (found by FuzzGeneratedPolicy). 24 units is 8.4 µs at the calibrated rate.
const quantityParseCost = 24

var stringCostTrackers = cel.CostTrackerOptions(
	interpreter.OverloadCostTracker("string_to_quantity", trackQuantity),
	interpreter.OverloadCostTracker("is_quantity_string", trackQuantity),
	interpreter.OverloadCostTracker("string_char_at_int", func(args []ref.Val, _ ref.Val) *uint64 {
		cost := 1 + traversal(strLen(args[0]))
		return &cost
	}),
	interpreter.OverloadCostTracker("string_index_of_string", trackSearch),
	interpreter.OverloadCostTracker("string_index_of_string_int", trackSearch),
	interpreter.OverloadCostTracker("string_last_index_of_string", trackSearch),
	interpreter.OverloadCostTracker("string_last_index_of_string_int", trackSearch),
	interpreter.OverloadCostTracker("string_split_string", trackSplit),
	interpreter.OverloadCostTracker("string_split_string_int", trackSplit),
	interpreter.OverloadCostTracker("string_replace_string_string", trackReplace),
	interpreter.OverloadCostTracker("string_replace_string_string_int", trackReplace),
)

func trackQuantity(args []ref.Val, _ ref.Val) *uint64 {
	cost := quantityCost(min(strLen(args[0]), maxQuantityLength))
	return &cost
}

// quantityCost is the charge of quantity() or isQuantity() on a string of n characters, n
// at most maxQuantityLength: past it the guard refuses the call after a length check.
func quantityCost(n uint64) uint64 { return 1 + traversal(n) + quantityParseCost }

// strLen is the length in bytes of a string value (at least its characters), 0 otherwise.
func strLen(v ref.Val) uint64 {
	s, _ := v.Value().(string)
	return uint64(len(s))
}

func trackSearch(args []ref.Val, _ ref.Val) *uint64 {
	cost := searchCost(strLen(args[0]), strLen(args[1]))
	return &cost
}

func trackSplit(args []ref.Val, result ref.Val) *uint64 {
	cost := 1 + 2*traversal(strLen(args[0]))
	if l, ok := result.(traits.Sizer); ok {
		cost = addSaturating(cost, uint64(l.Size().(types.Int)))
	}
	return &cost
}

func trackReplace(args []ref.Val, result ref.Val) *uint64 {
	cost := addSaturating(1+2*traversal(strLen(args[0])), traversal(strLen(result)))
	return &cost
}

// stringCallEstimate is the static counterpart of stringCostTrackers for overloadID; nil
// when the overload is not one of them or its sizes are unknown (the library's estimate
// stands).
func (e estimator) stringCallEstimate(overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if est := e.linearCallEstimate(overloadID, target, args); est != nil {
		return est
	}
	if isQuantityOp(overloadID) {
		return quantityOpEstimate
	}
	if target == nil {
		if (overloadID == "string_to_quantity" || overloadID == "is_quantity_string") && len(args) == 1 {
			return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: quantityCost(min(e.stringBound(args[0]), maxQuantityLength))}}
		}
		return nil
	}
	n := e.stringBound(*target)
	switch overloadID {
	case "string_char_at_int":
		// One character: up to four bytes, which the charges of what reads it count.
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1 + traversal(n)},
			ResultSize: &checker.SizeEstimate{Min: 0, Max: utf8.UTFMax}}
	case "string_index_of_string", "string_index_of_string_int",
		"string_last_index_of_string", "string_last_index_of_string_int":
		if len(args) == 0 {
			return nil
		}
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: searchCost(n, e.stringBound(args[0]))}}
	case "string_split_string", "string_split_string_int":
		parts := partsBound(n, literalInt(args, 1))
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: addSaturating(1+2*traversal(n), parts)},
			ResultSize: &checker.SizeEstimate{Min: 0, Max: parts}}
	case "string_replace_string_string", "string_replace_string_string_int":
		if len(args) < 2 {
			return nil
		}
		size := replaceBound(n, literalLen(args[0]), e.stringBound(args[1]), literalInt(args, 2))
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: addSaturating(1+2*traversal(n), traversal(size))},
			ResultSize: &checker.SizeEstimate{Min: 0, Max: size}}
	}
	return nil
}

// literalInt is args[i] when it is an int literal, else -1 (no limit known).
func literalInt(args []checker.AstNode, i int) int64 {
	if i >= len(args) {
		return -1
	}
	return literalIntOf(args[i].Expr())
}

// literalIntOf is e's value when it is an int literal, else -1 (a limit argument's "none").
func literalIntOf(e ast.Expr) int64 {
	if e.Kind() != ast.LiteralKind {
		return -1
	}
	if v, ok := e.AsLiteral().(types.Int); ok {
		return int64(v)
	}
	return -1
}

// literalLen is the length of a string literal, 0 (the worst case) for anything else.
func literalLen(a checker.AstNode) uint64 {
	s, _ := literalString(a.Expr())
	return uint64(len(s))
}

// replaceBound bounds the characters of s.replace(old, new[, limit]) for a receiver of n,
// an old of at least oldLen and a new of at most newLen characters: every possible match
// replaced (with an empty old, one before each character and one at the end).
func replaceBound(n, oldLen, newLen uint64, limit int64) uint64 {
	matches := n + 1
	if oldLen > 0 {
		matches = n / oldLen
	}
	if limit >= 0 {
		matches = min(matches, uint64(limit))
	}
	return addSaturating(n, saturatingMul(matches, newLen))
}

// replaceResultArg bounds the characters s.replace(old, new[, n]) produces, before the
// library builds them: the cost tracker charges the result after it exists, so
// x.replace('a', x) on a 1,000-character x built a megabyte, and on two annotation values
// 68 GB, before any limit could stop it.
func replaceResultArg(args []ref.Val, maxChars uint64) error {
	if len(args) < 3 {
		return nil
	}
	s, _ := args[0].Value().(string)
	old, _ := args[1].Value().(string)
	repl, _ := args[2].Value().(string)
	matches := uint64(strings.Count(s, old))
	if len(args) > 3 {
		if l, ok := args[3].(types.Int); ok && l >= 0 {
			matches = min(matches, uint64(l))
		}
	}
	size := addSaturating(uint64(len(s)), saturatingMul(matches, uint64(len(repl))))
	if size > maxChars {
		return fmt.Errorf("the result would hold more than %d characters, what one call may produce within the per-call cost limit", maxChars)
	}
	return nil
}

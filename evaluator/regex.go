package evaluator

import (
	"fmt"
	"math"
	"regexp/syntax"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// Regular expressions (matches, find, findAll) cost what their compiled program costs, not
// what their text costs: Go's regexp does work proportional to the input's length times the
// program's size (`a{1000}x` is 9 characters and 1,002 instructions), and compiling a program
// takes memory proportional to its size (`\pL{1000}` repeated a few times held hundreds of
// megabytes). So a pattern must be a string literal, bounded before anything compiles it, and
// a call is charged its input's length times its program's size.
const (
	// maxRegexPatternLength bounds the characters of a pattern, so that parsing it is cheap.
	maxRegexPatternLength = 1024
	// maxRegexRepeat bounds the count of a repetition (x{n}, x{n,m}): a DNS name's 253 fits.
	maxRegexRepeat = 256
	// maxRegexProgram bounds a pattern's compiled program: instructions after Simplify, each
	// 32 ranges of a character class counting one more (they are its memory and match time).
	maxRegexProgram = 1000
)

// regexCalls maps each regex overload's function to the position of its pattern in the
// call's arguments (a member call's target is not among them): s.matches(p), matches(s, p),
// s.find(p), s.findAll(p[, n]).
var regexCalls = map[string]struct{ member, global int }{
	"matches": {member: 0, global: 1},
	"find":    {member: 0, global: -1},
	"findAll": {member: 0, global: -1},
}

// regexPattern returns the pattern argument of call when it is a regex function, and whether
// it is one.
func regexPattern(call ast.CallExpr) (ast.Expr, bool) {
	pos, ok := regexCalls[call.FunctionName()]
	if !ok {
		return nil, false
	}
	i := pos.global
	if call.IsMemberFunction() {
		i = pos.member
	}
	if i < 0 || i >= len(call.Args()) {
		return nil, false
	}
	return call.Args()[i], true
}

// regexErrors reports every regex call of a parsed (not yet checked) expression whose pattern
// is not a string literal or is beyond the bounds. It runs before the checker, whose
// regex-literal validator compiles every literal pattern.
func regexErrors(e ast.Expr) []string {
	var out []string
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind {
			return
		}
		pattern, ok := regexPattern(e.AsCall())
		if !ok {
			return
		}
		fn := e.AsCall().FunctionName()
		s, lit := literalString(pattern)
		if !lit {
			out = append(out, fmt.Sprintf("the pattern of %s() must be a string literal: its "+
				"cost is checked when the policy is compiled", fn))
			return
		}
		if _, err := regexProgramSize(s); err != nil {
			out = append(out, fmt.Sprintf("%s(): pattern %q: %v", fn, truncate(s), err))
		}
	}))
	return out
}

// regexProgramSize is the size of pattern's compiled program (see maxRegexProgram), or why
// the pattern is refused. It bounds the pattern before building its program.
func regexProgramSize(pattern string) (int, error) {
	if len(pattern) > maxRegexPatternLength {
		return 0, fmt.Errorf("%d characters, at most %d", len(pattern), maxRegexPatternLength)
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0, err
	}
	if n, err := regexBound(re); err != nil {
		return 0, err
	} else if n > maxRegexProgram {
		return 0, fmt.Errorf("program of more than %d instructions, at most %d", maxRegexProgram, maxRegexProgram)
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0, err
	}
	size := len(prog.Inst)
	for _, inst := range prog.Inst {
		size += len(inst.Rune) / 64 // two runes a range
	}
	if size > maxRegexProgram {
		return 0, fmt.Errorf("program of %d instructions, at most %d", size, maxRegexProgram)
	}
	return size, nil
}

// programSizes memoizes regexProgramSize for the cost trackers: every regex call is charged
// by its pattern's program, and parsing and compiling the pattern again on each call would
// double the work of the call it charges. Patterns are compile-time literals, so the set
// is small; it is capped all the same (candidate policies of dry runs bring new ones), and a
// pattern past the cap is sized afresh.
type programSizes struct {
	mu    sync.Mutex
	sizes map[string]int
}

// maxMemoizedPatterns caps programSizes.
const maxMemoizedPatterns = 4096

// runtimeProgramSizes serves regexCostTrackers.
var runtimeProgramSizes = &programSizes{sizes: map[string]int{}}

// get returns pattern's program size, the largest program for a pattern the guard refuses
// (it cannot reach here: patterns are literals checked at compile time).
func (m *programSizes) get(pattern string) int {
	m.mu.Lock()
	n, ok := m.sizes[pattern]
	m.mu.Unlock()
	if ok {
		return n
	}
	n, err := regexProgramSize(pattern)
	if err != nil {
		n = maxRegexProgram
	}
	m.mu.Lock()
	if len(m.sizes) < maxMemoizedPatterns {
		m.sizes[pattern] = n
	}
	m.mu.Unlock()
	return n
}

// regexBound is an upper bound of the program re compiles to, saturating past
// maxRegexProgram, computed on the parse tree so that an oversized program is never built;
// it refuses a repetition count beyond maxRegexRepeat.
func regexBound(re *syntax.Regexp) (int, error) {
	sat := func(n int) int { return min(n, maxRegexProgram+1) }
	subs := 0
	for _, s := range re.Sub {
		n, err := regexBound(s)
		if err != nil {
			return 0, err
		}
		subs = sat(subs + n)
	}
	switch re.Op {
	case syntax.OpLiteral:
		return sat(len(re.Rune) + 1), nil
	case syntax.OpCharClass:
		return sat(2 + len(re.Rune)/64), nil
	case syntax.OpRepeat:
		if re.Min > maxRegexRepeat || re.Max > maxRegexRepeat {
			return 0, fmt.Errorf("repetition count %d, at most %d", max(re.Min, re.Max), maxRegexRepeat)
		}
		copies := max(re.Min, re.Max) + 1
		return sat(copies * (subs + 2)), nil
	}
	return sat(subs + len(re.Sub) + 2), nil
}

// regexCost is the cost of matching a string of length n against a program of size insts:
// the library's formula (string traversal × pattern factor) with the program's size in place
// of the pattern's length. Measured, the largest programs on the longest names cost ~250 ns
// per unit charged, less than comprehensions building maps (~320 ns), which set the budgets
// (DefaultLimits); a higher charge would refuse fast patterns on long values (a onepass
// `^[a-z]+$` on an annotation value) and bound nothing the budgets do not already bound.
func regexCost(n uint64, insts int) uint64 {
	str := uint64(math.Ceil(float64(1+n) * common.StringTraversalCostFactor))
	return str * uint64(math.Ceil(float64(insts)*common.RegexStringLengthCostFactor))
}

// regexOverloads are the overload IDs of the regex functions with the position of the
// string matched (0) and of the pattern (1) in the runtime arguments (target first).
var regexOverloads = []string{"matches", "matches_string", "string_find_string",
	"string_find_all_string", "string_find_all_string_int"}

// regexCostTrackers charge each regex call at run time by regexCost; a pattern the guard
// would refuse (it cannot reach here: patterns are literals checked at compile time) is
// charged as the largest program.
var regexCostTrackers = func() cel.ProgramOption {
	var opts []interpreter.CostTrackerOption
	for _, id := range regexOverloads {
		opts = append(opts, interpreter.OverloadCostTracker(id, func(args []ref.Val, result ref.Val) *uint64 {
			if len(args) < 2 {
				return nil
			}
			s, _ := args[0].Value().(string)
			p, _ := args[1].Value().(string)
			cost := regexCost(uint64(len(s)), runtimeProgramSizes.get(p))
			if l, ok := result.(traits.Lister); ok { // findAll: one string built per match
				cost = addSaturating(cost, saturatingMul(findAllMatchCost, uint64(l.Size().(types.Int))))
			}
			return &cost
		}))
	}
	return cel.CostTrackerOptions(opts...)
}()

// findAllMatchCost is findAll's charge per match, on top of the search: the matches are
// collected, then each boxed as a CEL string, ~300 ns a match on the reference machine
// (BenchmarkCostCalibration/find-all-long: 338 ns/unit at one unit a match, at the
// calibrated worst; before, matches were not charged at all and findAll('a') over 262,000
// characters took ~100 ms for 26,251 units).
const findAllMatchCost = 2

// regexEstimate is the static counterpart of regexCostTrackers: the string's bound times the
// literal pattern's program size; nil when the call is not a regex call with a literal.
func (e estimator) regexEstimate(function string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	var str, pattern checker.AstNode
	switch {
	case target != nil && len(args) >= 1:
		str, pattern = *target, args[0]
	case target == nil && function == "matches" && len(args) == 2:
		str, pattern = args[0], args[1]
	default:
		return nil
	}
	p, ok := literalString(pattern.Expr())
	if !ok {
		return nil
	}
	insts, err := regexProgramSize(p)
	if err != nil {
		insts = maxRegexProgram
	}
	n := e.stringBound(str)
	cost := regexCost(n, insts)
	if function == "findAll" { // one string built per match: at most one per position, or the limit
		matches := partsBound(n, literalInt(args, 1))
		cost = addSaturating(cost, saturatingMul(findAllMatchCost, matches))
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: cost},
			ResultSize: &checker.SizeEstimate{Min: 0, Max: matches}}
	}
	est := &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: cost}}
	if function != "matches" {
		est.ResultSize = &checker.SizeEstimate{Min: 0, Max: n}
	}
	return est
}

// stringBound bounds the length of the string str: a literal's own length, else its size
// estimate, else — a library call whose result the checker cannot size (trim(),
// lowerAscii(), replace(), …) — the largest string an input or variable may hold. Returning
// no estimate there left the library's pattern-length formula in place, and
// annotation.trim().matches('.{200}x') passed the estimate and ran for seconds.
//
// The size the checker computed comes first: a concatenation, or any sized call, seen through
// dyn(), is as long as the checker says, where the paths of EstimateSize know nothing of it
// and the fallback is shorter than two annotations: dyn(a + a).charAt(0) on two 262,144-
// character annotations was estimated at 85,308 and charged 104,866.
func (e estimator) stringBound(str checker.AstNode) uint64 {
	if s, ok := literalString(str.Expr()); ok {
		return uint64(len(s))
	}
	if n, ok := e.computedBytes(str); ok {
		return n
	}
	if est := e.EstimateSize(str); est != nil && est.Max != math.MaxUint64 {
		return est.Max
	}
	// A string the checker cannot size, such as a comprehension's variable, by its derived
	// bound (an element of its range), as the estimate sizes a variable's value; so is a
	// dyn value the call dispatches to a string overload ([dyn(a + a)][0].charAt(0)).
	if t := str.Type(); t != nil && (t.Kind() == types.StringKind || unknownShape(t)) {
		if b, ok := e.derivedBound(str.Expr()); ok {
			return b.size
		}
	}
	return max(maxFormattedArg, e.longestString())
}

// longestString bounds the strings the expression estimated builds: the largest derived
// bound of its string subexpressions other than literals (a concatenation, a join(), a
// variable). A string the analysis cannot size where it is used (behind optional.of(…).value(),
// first(), a list index of dyn) was built by one of them: assuming it no longer than the
// longest input, optional.of(a + a).value().charAt(0) on two 262,144-character annotations was
// estimated at 85,309 and charged 104,867. 0 without bounds (an estimator of no expression).
func (e estimator) longestString() uint64 {
	if e.bounds == nil || e.longest == nil {
		return 0
	}
	if !e.longest.done {
		e.longest.done = true
		ast.PreOrderVisit(e.bounds.a.Expr(), ast.NewExprVisitor(func(x ast.Expr) {
			if x.Kind() == ast.LiteralKind {
				return
			}
			if t := e.bounds.a.GetType(x.ID()); t == nil || t.Kind() != types.StringKind {
				return
			}
			if b, ok := e.derivedBound(x); ok {
				e.longest.n = max(e.longest.n, b.size)
			}
		}))
	}
	return e.longest.n
}

package cost

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
)

// Regular expressions (matches, find, findAll) cost what their compiled program costs, not
// what their text costs: Go's regexp does work up to the input's length times the program's
// size (`a{1000}x` is 9 characters and 1,002 instructions), and compiling a program takes
// memory proportional to its size. So a pattern must be a string literal, bounded before
// anything compiles it (cel-go's checker compiles literal patterns), and a call runs only when
// its input's length times its program's size is within MaxRegexSteps (regexOptimizations).
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

// RegexErrors reports every regex call of a parsed (not yet checked) expression whose pattern
// is not a string literal or is beyond the bounds. It runs before the checker, whose
// regex-literal validator compiles every literal pattern.
func RegexErrors(e ast.Expr) []string {
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

// programSizes memoizes regexProgramSize for regexSteps: parsing and compiling the pattern
// again on each call would double the work of the call it bounds. Patterns are compile-time literals, so the set
// is small; it is capped all the same (candidate policies of dry runs bring new ones), and a
// pattern past the cap is sized afresh.
type programSizes struct {
	mu    sync.Mutex
	sizes map[string]int
}

// maxMemoizedPatterns caps programSizes.
const maxMemoizedPatterns = 4096

// runtimeProgramSizes serves regexSteps.
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

// regexOptimizations compile a regex call's literal pattern once, as cel-go's and the
// Kubernetes library's optimizations do (which they replace, by overload), and make the call
// fail closed, before Go's regexp runs, when its input's length times its program's size
// exceeds MaxRegexSteps. Every pattern is a literal (RegexErrors), so every regex call is one
// of these.
var regexOptimizations = func() cel.ProgramOption {
	var opts []*interpreter.RegexOptimization
	for _, r := range regexMatchers {
		opts = append(opts, regexOptimization(r.function, r.overload, r.match))
	}
	return cel.OptimizeRegex(opts...)
}()

// regexMatchers are the regex overloads and what each does with its compiled pattern, as
// cel-go's and the Kubernetes library's implementations do.
var regexMatchers = []struct {
	function, overload string
	match              func(re *regexp.Regexp, s string, args []ref.Val) ref.Val
}{
	{"matches", "matches", matches},
	{"matches", "matches_string", matches},
	{"find", "string_find_string", func(re *regexp.Regexp, s string, _ []ref.Val) ref.Val { return types.String(re.FindString(s)) }},
	{"findAll", "string_find_all_string", findAll},
	{"findAll", "string_find_all_string_int", findAll},
}

// matches is matches() on a compiled pattern.
func matches(re *regexp.Regexp, s string, _ []ref.Val) ref.Val { return types.Bool(re.MatchString(s)) }

// findAll is the Kubernetes library's findAll() on a compiled pattern.
func findAll(re *regexp.Regexp, s string, args []ref.Val) ref.Val {
	n := int64(-1)
	if len(args) == 3 {
		var ok bool
		if n, ok = args[2].Value().(int64); !ok {
			return types.MaybeNoSuchOverloadErr(args[2])
		}
	}
	return types.NewStringList(types.DefaultTypeAdapter, re.FindAllString(s, int(n)))
}

// regexOptimization is the optimization of function's overload: match applied to the pattern
// compiled once, after regexSteps.
func regexOptimization(function, overload string, match func(*regexp.Regexp, string, []ref.Val) ref.Val) *interpreter.RegexOptimization {
	return &interpreter.RegexOptimization{Function: function, OverloadID: overload, RegexIndex: 1,
		Factory: func(call interpreter.InterpretableCall, pattern string) (interpreter.InterpretableCall, error) {
			re, err := regexp.Compile(pattern)
			if err != nil {
				return nil, err
			}
			size := runtimeProgramSizes.get(pattern)
			return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(), func(args ...ref.Val) ref.Val {
				s, ok := args[0].Value().(string)
				if !ok {
					return types.MaybeNoSuchOverloadErr(args[0])
				}
				if err := regexSteps(len(s), size); err != nil {
					return types.WrapErr(fmt.Errorf("%s(): %w", function, err))
				}
				return match(re, s, args)
			}), nil
		}}
}

// regexSteps bounds a regex call on n characters with a program of size instructions.
func regexSteps(n, size int) error {
	if steps := saturatingMul(uint64(n)+1, uint64(size)); steps > MaxRegexSteps {
		return fmt.Errorf("matching %d characters against a program of %d instructions takes up to %d steps, at most %d",
			n, size, steps, MaxRegexSteps)
	}
	return nil
}

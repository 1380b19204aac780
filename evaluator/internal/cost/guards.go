package cost

import (
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/api/resource"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// Guards bound the work of one library call that cel-go cannot interrupt: a check runs before
// the library's implementation and refuses arguments past the bound (a false answer for the
// is…() predicates, an error naming the function and the bound otherwise). A literal argument
// past a bound is refused when the expression is written (LiteralErrors).
const (
	// MaxQuantityLength bounds a quantity()/isQuantity() argument; MaxQuantityExponent its
	// decimal exponent, read from the text before parsing (comparing or adding quantities
	// rescales numbers of that many digits).
	MaxQuantityLength, MaxQuantityExponent = 64, 64
	// MaxIPLength, MaxCIDRLength, MaxURLLength and MaxSemverLength bound the text the parsers
	// read: the longest IPv6 address (with an IPv4 tail), the longest CIDR, what browsers and
	// servers accept of a URL, and a version; longer text cannot be valid, and the library
	// quotes a rejected argument, escaped, into its error.
	MaxIPLength, MaxCIDRLength, MaxURLLength, MaxSemverLength = 45, 49, 2048, 1024
	// MaxFormatPrecision bounds a format() clause's precision (as cel-go's strings library
	// does from version 5); MaxFloatClauses the %f and %e clauses one call renders, each
	// through a locale-aware printer.
	MaxFormatPrecision, MaxFloatClauses = 100, 100
	// MaxSearchSteps bounds the rune comparisons of one indexOf()/lastIndexOf() of a string
	// (cel-go's is a naive search: receiver × needle; ~40 ms at the bound).
	MaxSearchSteps = 1 << 26
	// MaxRegexSteps bounds the input characters × program instructions of one regex match,
	// what Go's regexp may do in the worst case (~10 ns a step: ~40 ms at the bound); a format
	// validator counts its regex's size.
	MaxRegexSteps = 1 << 22
	// MaxSortElements bounds the list one sort() or sortBy() orders (n log n comparisons of
	// CEL values, ~25 ms at the bound).
	MaxSortElements = 1 << 13
)

// callGuard is the check of one library function's overloads.
type callGuard struct {
	function string
	// overloads are the guarded overload IDs; none: every overload of function.
	overloads []string
	// check says why the call must not run on args, or returns nil.
	check func(c Config, args []ref.Val) error
	// refused is the result past the bound; nil for an error.
	refused ref.Val
	// literal: check reads only the first argument (a member call's target), so a literal
	// one is checked when the expression is written.
	literal bool
	// argument: the check bounds an argument's value, and its error says so.
	argument bool
}

// callGuards are the guarded calls (zones.go adds the time-zone accessors).
var callGuards = append([]callGuard{
	{function: "quantity", check: quantityArg, literal: true, argument: true},
	{function: "isQuantity", check: quantityArg, refused: types.False, literal: true, argument: true},
	{function: "ip", overloads: []string{"string_to_ip"}, check: textArg(0, MaxIPLength), literal: true, argument: true},
	{function: "isIP", check: textArg(0, MaxIPLength), refused: types.False, literal: true, argument: true},
	{function: "ip.isCanonical", check: textArg(0, MaxIPLength), literal: true, argument: true},
	{function: "cidr", check: textArg(0, MaxCIDRLength), literal: true, argument: true},
	{function: "isCIDR", check: textArg(0, MaxCIDRLength), refused: types.False, literal: true, argument: true},
	{function: "containsIP", overloads: []string{"cidr_contains_ip_string"}, check: textArg(1, MaxIPLength), argument: true},
	{function: "containsCIDR", overloads: []string{"cidr_contains_cidr_string"}, check: textArg(1, MaxCIDRLength), argument: true},
	{function: "url", check: textArg(0, MaxURLLength), literal: true, argument: true},
	{function: "isURL", check: textArg(0, MaxURLLength), refused: types.False, literal: true, argument: true},
	{function: "semver", check: textArg(0, MaxSemverLength), literal: true, argument: true},
	{function: "isSemver", check: textArg(0, MaxSemverLength), refused: types.False, literal: true, argument: true},
	{function: "format", check: formatArgs, argument: true},
	{function: "replace", check: replaceResult},
	{function: "join", check: joinResult},
	{function: "indexOf", overloads: []string{"string_index_of_string", "string_index_of_string_int"}, check: searchSteps},
	{function: "lastIndexOf", overloads: []string{"string_last_index_of_string", "string_last_index_of_string_int"}, check: searchSteps},
	{function: "validate", check: validateSteps},
	{function: "sort", check: sortSize},
	{function: "@sortByAssociatedKeys", check: sortSize},
}, zoneGuards()...)

// quantityArg bounds a quantity string's length and its value's decimal exponent. A string
// the library cannot parse is left to the library's own error.
func quantityArg(_ Config, args []ref.Val) error {
	s, ok := args[0].Value().(string)
	if !ok {
		return nil
	}
	if len(s) > MaxQuantityLength {
		return fmt.Errorf("%d characters, at most %d", len(s), MaxQuantityLength)
	}
	// The exponent is read from the text first: parsing 1e-9999999 itself runs for seconds.
	if i := strings.IndexAny(s, "eE"); i >= 0 && i+1 < len(s) {
		if e, err := strconv.Atoi(s[i+1:]); err == nil && (e > MaxQuantityExponent || e < -MaxQuantityExponent) {
			return fmt.Errorf("exponent %s, at most ±%d", s[i+1:], MaxQuantityExponent)
		}
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return nil
	}
	d := q.AsDec()
	unscaled := new(big.Int).Abs(d.UnscaledBig())
	exp := int64(len(unscaled.String())) - 1 - int64(d.Scale())
	if unscaled.Sign() != 0 && (exp > MaxQuantityExponent || exp < -MaxQuantityExponent) {
		return fmt.Errorf("decimal exponent %d, at most ±%d", exp, MaxQuantityExponent)
	}
	return nil
}

// textArg bounds the characters of the string argument i.
func textArg(i, max int) func(Config, []ref.Val) error {
	return func(_ Config, args []ref.Val) error {
		if i < len(args) {
			if s, ok := args[i].Value().(string); ok && len(s) > max {
				return fmt.Errorf("%d characters, at most %d", len(s), max)
			}
		}
		return nil
	}
}

// formatArgs bounds a format() call: each clause's precision, its float clauses, and the
// characters its arguments format to (it is charged by its output, after building it).
func formatArgs(c Config, args []ref.Val) error {
	f, ok := args[0].Value().(string)
	if !ok {
		return nil
	}
	floats := 0
	for _, cl := range formatClauses(f) {
		if digits := strings.TrimLeft(cl.precision, "0"); len(digits) > 3 || atoi(digits) > MaxFormatPrecision {
			return fmt.Errorf("precision %s, at most %d", truncate(cl.precision), MaxFormatPrecision)
		}
		if cl.verb == 'f' || cl.verb == 'e' {
			floats++
		}
	}
	if floats > MaxFloatClauses {
		return fmt.Errorf("%d %%f or %%e clauses, at most %d", floats, MaxFloatClauses)
	}
	if len(args) < 2 {
		return nil
	}
	limit := c.maxChars()
	if slices.ContainsFunc(formatClauses(f), func(cl formatClause) bool { return cl.verb == 'x' || cl.verb == 'X' }) {
		limit /= 2 // each byte of a string renders as two characters
	}
	if formattedLength(args[1], limit) > limit {
		return fmt.Errorf("the arguments format to more than %d characters, what one call may produce", c.maxChars())
	}
	return nil
}

// formatClause is one clause of a format string as cel-go's format reads it:
// %[.precision]verb.
type formatClause struct {
	precision string // the digits after '.', "" without one
	verb      byte   // 0 when the string ends after the precision
}

// formatClauses are the clauses of the format string s ("%%" is none).
func formatClauses(s string) []formatClause {
	var out []formatClause
	for i := 0; i < len(s)-1; i++ {
		if s[i] != '%' {
			continue
		}
		j := i + 1
		if s[j] == '%' {
			i = j
			continue
		}
		var c formatClause
		if s[j] == '.' {
			k := j + 1
			for k < len(s) && s[k] >= '0' && s[k] <= '9' {
				k++
			}
			c.precision, j = s[j+1:k], k
		}
		if j < len(s) {
			c.verb = s[j]
		}
		out = append(out, c)
		i = j - 1
	}
	return out
}

func atoi(digits string) int {
	n := 0
	for _, c := range digits {
		n = n*10 + int(c-'0')
	}
	return n
}

// maxFormattedDouble is the most characters a double formats to within the precision bound.
const maxFormattedDouble = 310 + MaxFormatPrecision

// formattedLength bounds the characters v formats to with %s, stopping past limit: the walk
// visits at most one element per character counted (each costs its separator).
func formattedLength(v ref.Val, limit uint64) uint64 {
	switch x := v.(type) {
	case types.String:
		return uint64(len(x))
	case types.Bytes:
		return 2 * uint64(len(x))
	case types.Double:
		return maxFormattedDouble
	case traits.Mapper:
		n := uint64(2)
		for it := x.Iterator(); it.HasNext() == types.True && n <= limit; {
			k := it.Next()
			n = addSaturating(n, addSaturating(addSaturating(formattedLength(k, limit), formattedLength(x.Get(k), limit)), 4))
		}
		return n
	case traits.Lister:
		n := uint64(2)
		for it := x.Iterator(); it.HasNext() == types.True && n <= limit; {
			n = addSaturating(n, addSaturating(formattedLength(it.Next(), limit), 2))
		}
		return n
	}
	return 64 // an int, a bool, null, a timestamp or a duration
}

// replaceResult bounds the characters s.replace(old, new[, n]) produces, before the library
// builds them.
func replaceResult(c Config, args []ref.Val) error {
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
	if addSaturating(uint64(len(s)), saturatingMul(matches, uint64(len(repl)))) > c.maxChars() {
		return fmt.Errorf("the result would hold more than %d characters, what one call may produce", c.maxChars())
	}
	return nil
}

// joinResult bounds the characters l.join([sep]) produces, before the library builds them.
func joinResult(c Config, args []ref.Val) error {
	l, ok := args[0].(traits.Lister)
	if !ok {
		return nil
	}
	var sep uint64
	if len(args) > 1 {
		if s, ok := args[1].Value().(string); ok {
			sep = uint64(len(s))
		}
	}
	n, limit := uint64(0), c.maxChars()
	for it := l.Iterator(); it.HasNext() == types.True && n <= limit; {
		if s, ok := it.Next().Value().(string); ok {
			n = addSaturating(n, addSaturating(uint64(len(s)), sep))
		}
	}
	if n > limit {
		return fmt.Errorf("the result would hold more than %d characters, what one call may produce", limit)
	}
	return nil
}

// searchSteps bounds the rune comparisons of s.indexOf(t) or s.lastIndexOf(t): at most
// (|s| - |t| + 1) × |t|, counted in bytes (at least the runes).
func searchSteps(_ Config, args []ref.Val) error {
	if len(args) < 2 {
		return nil
	}
	s, _ := args[0].Value().(string)
	t, _ := args[1].Value().(string)
	if len(t) == 0 || len(t) > len(s) {
		return nil
	}
	if steps := saturatingMul(uint64(len(s)-len(t)+1), uint64(len(t))); steps > MaxSearchSteps {
		return fmt.Errorf("a search of %d characters for %d compares up to %d characters, at most %d",
			utf8.RuneCountInString(s), utf8.RuneCountInString(t), steps, MaxSearchSteps)
	}
	return nil
}

// sortSize bounds the list sort() or sortBy() orders.
func sortSize(_ Config, args []ref.Val) error {
	if n := listSize(args[0]); n > MaxSortElements {
		return fmt.Errorf("a list of %d elements, at most %d", n, MaxSortElements)
	}
	return nil
}

// validateSteps bounds f.validate(s) of a named format, which matches s against the format's
// regex (a uri's is 1,103 instructions).
func validateSteps(_ Config, args []ref.Val) error {
	if len(args) < 2 {
		return nil
	}
	f, ok := args[0].Value().(apiservercel.Format)
	s, isString := args[1].Value().(string)
	if !ok || !isString {
		return nil
	}
	if steps := saturatingMul(uint64(len(s))+1, uint64(f.MaxRegexSize)); steps > MaxRegexSteps {
		return fmt.Errorf("validating %d characters against the %s format's regex (%d) takes up to %d steps, at most %d",
			len(s), f.Name, f.MaxRegexSize, steps, MaxRegexSteps)
	}
	return nil
}

// guardedOverloads rebinds every guarded overload of base with its guard in front. A
// function the library binds once for all its overloads (a singleton binding, which cannot be
// rebound per overload) is returned in singletons instead, guarded where its calls are
// planned (decorate).
func (c Config) guardedOverloads(base *cel.Env) (opts []cel.EnvOption, singletons map[string]singleton, err error) {
	singletons = map[string]singleton{}
	for _, g := range callGuards {
		stop := func(args []ref.Val) ref.Val { return c.refusal(g, args) }
		if impl, ok := singletonOf(base, g.function); ok {
			singletons[g.function] = singleton{impl: impl, stop: stop}
			continue
		}
		found, err := rebind(base, g.function, g.overloads, func(orig *functions.Overload) cel.OverloadOpt {
			return c.guarded(orig, stop)
		})
		if err != nil {
			return nil, nil, err
		}
		if len(found) == 0 {
			return nil, nil, fmt.Errorf("guarded function %s has none of the overloads %v", g.function, g.overloads)
		}
		opts = append(opts, found...)
	}
	return opts, singletons, nil
}

// singleton is the implementation of a function bound once for all its overloads, and the
// guard in front of it.
type singleton struct {
	impl *functions.Overload
	stop func([]ref.Val) ref.Val
}

// singletonOf is the binding of function in base when it is bound once for all its overloads:
// its one binding is named after the function.
func singletonOf(base *cel.Env, function string) (*functions.Overload, bool) {
	decl, ok := base.Functions()[function]
	if !ok {
		return nil, false
	}
	bindings, err := decl.Bindings()
	if err != nil || len(bindings) != 1 || bindings[0].Operator != function {
		return nil, false
	}
	return bindings[0], true
}

// singletonCall is a planned call of a singleton-bound function: its arguments evaluated, its
// guard checked, then its implementation called, as the interpreter would call it.
type singletonCall struct {
	interpreter.InterpretableCall
	singleton
}

// Exec implements interpreter.InterpretableV2.
func (s *singletonCall) Exec(frame *interpreter.ExecutionFrame) ref.Val {
	args := make([]ref.Val, len(s.Args()))
	for i, a := range s.Args() {
		if args[i] = a.Exec(frame); types.IsUnknownOrError(args[i]) {
			return args[i]
		}
	}
	if v := s.stop(args); v != nil {
		return v
	}
	switch {
	case len(args) == 1 && s.impl.Unary != nil:
		return s.impl.Unary(args[0])
	case len(args) == 2 && s.impl.Binary != nil:
		return s.impl.Binary(args[0], args[1])
	case s.impl.Function != nil:
		return s.impl.Function(args...)
	}
	return types.NoSuchOverloadErr()
}

// Eval implements interpreter.Interpretable.
func (s *singletonCall) Eval(act interpreter.Activation) ref.Val {
	return s.Exec(interpreter.AsFrame(act))
}

// refusal is g's result when args are past its bound: g.refused, or the guard's error; nil
// when they are within it.
func (c Config) refusal(g callGuard, args []ref.Val) ref.Val {
	err := g.check(c, args)
	switch {
	case err == nil:
		return nil
	case g.refused != nil:
		return g.refused
	}
	if g.argument {
		return types.WrapErr(guardError(g.function, err))
	}
	return types.WrapErr(fmt.Errorf("%s(): %w", g.function, err))
}

// rebind declares the overloads ids of function again (all of them when ids is empty), each
// bound to what wrap makes of its implementation in base: a declaration given later replaces
// the binding of an overload of the same signature. An error when base lacks the function.
func rebind(base *cel.Env, function string, ids []string, wrap func(*functions.Overload) cel.OverloadOpt) ([]cel.EnvOption, error) {
	decl, ok := base.Functions()[function]
	if !ok {
		return nil, fmt.Errorf("function %s is not in the environment", function)
	}
	bindings, err := decl.Bindings()
	if err != nil {
		return nil, err
	}
	impl := map[string]*functions.Overload{}
	for _, b := range bindings {
		impl[b.Operator] = b
	}
	var opts []cel.EnvOption
	for _, o := range decl.OverloadDecls() {
		orig := impl[o.ID()]
		if orig == nil || (len(ids) > 0 && !slices.Contains(ids, o.ID())) {
			continue
		}
		overload := cel.Overload
		if o.IsMemberFunction() {
			overload = cel.MemberOverload
		}
		opts = append(opts, cel.Function(function, overload(o.ID(), o.ArgTypes(), o.ResultType(), wrap(orig))))
	}
	return opts, nil
}

// guarded is orig's implementation behind stop, which returns the call's result when it must
// not run (nil otherwise).
func (c Config) guarded(orig *functions.Overload, stop func([]ref.Val) ref.Val) cel.OverloadOpt {
	switch {
	case orig.Unary != nil:
		return cel.UnaryBinding(func(a ref.Val) ref.Val {
			if v := stop([]ref.Val{a}); v != nil {
				return v
			}
			return orig.Unary(a)
		})
	case orig.Binary != nil:
		return cel.BinaryBinding(func(a, b ref.Val) ref.Val {
			if v := stop([]ref.Val{a, b}); v != nil {
				return v
			}
			return orig.Binary(a, b)
		})
	}
	return cel.FunctionBinding(func(args ...ref.Val) ref.Val {
		if v := stop(args); v != nil {
			return v
		}
		return orig.Function(args...)
	})
}

// LiteralErrors reports, for an expression being written, each guarded call whose first
// argument is a literal past its bound (it fails whenever it is evaluated, and constant
// folding evaluates it when the program is planned), and each time-zone accessor given a
// literal name that is no zone.
func (c Config) LiteralErrors(e ast.Expr) []string {
	var out []string
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind {
			return
		}
		call := e.AsCall()
		args := call.Args()
		if call.IsMemberFunction() {
			args = append([]ast.Expr{call.Target()}, args...)
		}
		if len(args) == 0 || args[0].Kind() != ast.LiteralKind {
			return
		}
		for _, g := range callGuards {
			if g.function == call.FunctionName() && g.literal && g.refused == nil {
				if err := g.check(c, []ref.Val{args[0].AsLiteral()}); err != nil {
					out = append(out, guardError(g.function, err).Error())
				}
			}
		}
	}))
	return append(out, literalZoneErrors(e)...)
}

// literalString is e's value when e is a string literal.
func literalString(e ast.Expr) (string, bool) {
	if e == nil || e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// listSize is the number of entries of v, 0 for a value without.
func listSize(v ref.Val) uint64 {
	if s, ok := v.(traits.Sizer); ok {
		if n, ok := s.Size().(types.Int); ok && n > 0 {
			return uint64(n)
		}
	}
	return 0
}

package evaluator

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/decls"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	"github.com/google/cel-go/parser"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apiserver/pkg/cel/environment"
)

// Library calls whose work grows with the value of their input, not with its length (which
// is all CEL's cost accounting sees), are guarded: their input is checked against a bound
// before the library runs — at compile time when it is a literal (the policy is refused), at
// evaluation time otherwise (the evaluation fails closed). docs/CEL-LIBRARY.md surveys every
// function of the environment and how its work is bounded.

// Bounds of the guarded calls. Kubernetes caps a Quantity at 2^63-1 in magnitude and nano
// precision when it serializes one; a quantity() of a policy may be far wider, but not so wide
// that comparing it with another rescales a number of millions of digits (quantity('1e9999999')
// == quantity('1') ran for seconds at a cost of 118).
const (
	// maxQuantityLength bounds the characters of a quantity()/isQuantity() argument: parsing a
	// long digit string is superlinear.
	maxQuantityLength = 64
	// maxQuantityExponent bounds the decimal exponent of a quantity's value (1e64, 1e-64).
	maxQuantityExponent = 64
	// maxIPLength, maxCIDRLength and maxURLLength bound the characters of an ip()/isIP()/
	// ip.isCanonical()/containsIP(), cidr()/isCIDR()/containsCIDR() and url()/isURL() argument: the longest IPv6 text (an IPv4 tail) is 45
	// characters, a CIDR 49, and 2,048 is the URL length browsers and servers have long
	// accepted. The library's errors quote a rejected argument Go-escaped, each zero-width
	// space six bytes: 87,000 of them took 0.15-0.27 s and 60-120 MiB a call, charged 8,700.
	maxIPLength, maxCIDRLength, maxURLLength = 45, 49, 2048
	// maxSemverLength bounds the characters of a semver()/isSemver() argument. A version
	// string is short (Kubernetes', an image tag's ≤ 128, a chart's); parsing allocates per
	// pre-release identifier, so a 256 KiB annotation of `0.0.0-a.a.a…` (131,000 identifiers)
	// allocated ~23 MiB and spent 3–4× the calibration's CPU per unit charged (vmipam#15,
	// atk10 finding 1).
	maxSemverLength = 1024
	// maxFormatPrecision bounds the precision of a format() clause (%.Nf, %.Ne), as cel-go's
	// own strings library does from version 5: '%.999999f' formats a megabyte per call.
	maxFormatPrecision = 100
)

// callGuard checks the input of one library overload before the library runs.
type callGuard struct {
	// function is the CEL name, overload the library's overload ID.
	function, overload string
	// check returns why args are beyond the bound, or nil; it reads only args[0].
	check func(args []ref.Val) error
	// refused is the result past the bound: nil for an error; isQuantity answers false.
	refused ref.Val
	// checkArgs, when set, checks the other arguments at run time only, against the
	// characters one call may produce (maxChars).
	checkArgs func(args []ref.Val, maxChars uint64) error
}

// callGuards are the guarded overloads, the time-zone accessors (zones.go) among them.
var callGuards = append([]callGuard{
	{function: "quantity", overload: "string_to_quantity", check: quantityArg},
	{function: "isQuantity", overload: "is_quantity_string", check: quantityArg, refused: types.False},
	{function: "ip", overload: "string_to_ip", check: lengthArg(maxIPLength)},
	{function: "isIP", overload: "is_ip", check: lengthArg(maxIPLength), refused: types.False},
	{function: "cidr", overload: "string_to_cidr", check: lengthArg(maxCIDRLength)},
	{function: "isCIDR", overload: "is_cidr", check: lengthArg(maxCIDRLength), refused: types.False},
	{function: "url", overload: "string_to_url", check: lengthArg(maxURLLength)},
	{function: "isURL", overload: "is_url_string", check: lengthArg(maxURLLength), refused: types.False},
	{function: "semver", overload: "string_to_semver", check: lengthArg(maxSemverLength)},
	{function: "semver", overload: "string_bool_to_semver", check: lengthArg(maxSemverLength)},
	{function: "isSemver", overload: "is_semver_string", check: lengthArg(maxSemverLength), refused: types.False},
	{function: "isSemver", overload: "is_semver_string_bool", check: lengthArg(maxSemverLength), refused: types.False},
	{function: "ip.isCanonical", overload: "ip_is_canonical", check: lengthArg(maxIPLength)},
	{function: "containsIP", overload: "cidr_contains_ip_string", check: noCheck, checkArgs: argLength(maxIPLength)},
	{function: "containsCIDR", overload: "cidr_contains_cidr_string", check: noCheck, checkArgs: argLength(maxCIDRLength)},
	{function: "format", overload: "string_format", check: formatArg, checkArgs: formatListArg},
	{function: "replace", overload: "string_replace_string_string", check: noCheck, checkArgs: replaceResultArg},
	{function: "replace", overload: "string_replace_string_string_int", check: noCheck, checkArgs: replaceResultArg},
}, zoneGuards()...)

// noCheck is the check of a guard that bounds only what a call produces (checkArgs).
func noCheck([]ref.Val) error { return nil }

// quantityArg bounds a quantity string's length and its value's decimal exponent. A string
// the library cannot parse is left to the library's own error.
func quantityArg(args []ref.Val) error {
	s, ok := args[0].Value().(string)
	if !ok {
		return nil
	}
	if len(s) > maxQuantityLength {
		return fmt.Errorf("%d characters, at most %d", len(s), maxQuantityLength)
	}
	// The exponent is read from the text first: parsing 1e-9999999 itself runs for seconds.
	if i := strings.IndexAny(s, "eE"); i >= 0 && i+1 < len(s) {
		if e, err := strconv.Atoi(s[i+1:]); err == nil && (e > maxQuantityExponent || e < -maxQuantityExponent) {
			return fmt.Errorf("exponent %s, at most ±%d", s[i+1:], maxQuantityExponent)
		}
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return nil
	}
	d := q.AsDec() // q is ours: converting it does not touch the caller's value
	unscaled := new(big.Int).Abs(d.UnscaledBig())
	exp := int64(len(unscaled.String())) - 1 - int64(d.Scale())
	if unscaled.Sign() != 0 && (exp > maxQuantityExponent || exp < -maxQuantityExponent) {
		return fmt.Errorf("decimal exponent %d, at most ±%d", exp, maxQuantityExponent)
	}
	return nil
}

// lengthArg bounds the characters of a string argument: longer, it cannot be valid, and
// the library would quote it, escaped, into its error.
func lengthArg(max int) func(args []ref.Val) error {
	return func(args []ref.Val) error {
		if s, ok := args[0].Value().(string); ok && len(s) > max {
			return fmt.Errorf("%d characters, at most %d", len(s), max)
		}
		return nil
	}
}

// argLength bounds the characters of the string a member call is given (args[1]), as
// lengthArg bounds a function's: cidr.containsIP(s) and cidr.containsCIDR(s) parse s as ip()
// and cidr() do (the library's cidrContainsIPString and cidrContainsCIDRString call its
// unguarded stringToIP and stringToCIDR) and quote it, escaped, into their error: on 87,000
// zero-width spaces they took 17.9 and 7.4 ms a call, charged 8,705.
func argLength(max int) func(args []ref.Val, _ uint64) error {
	return func(args []ref.Val, _ uint64) error {
		if len(args) < 2 {
			return nil
		}
		return lengthArg(max)(args[1:])
	}
}

// formatArg bounds the precision of every clause of a format string.
func formatArg(args []ref.Val) error {
	s, ok := args[0].Value().(string)
	if !ok {
		return nil
	}
	for _, c := range formatClauses(s) {
		if digits := strings.TrimLeft(c.precision, "0"); len(digits) > 3 || atoi(digits) > maxFormatPrecision {
			return fmt.Errorf("precision %s, at most %d", truncate(c.precision), maxFormatPrecision)
		}
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

// guardError is the error of a guarded call past its bound.
func (g callGuard) guardError(err error) error {
	return fmt.Errorf("%s(): argument beyond the bound policies are evaluated with: %w", g.function, err)
}

// guardedOverloads re-declares each guarded overload with its check before the library's own
// binding; cel-go lets an overload be rebound when its signature is unchanged.
// rebind declares function's overload again with the binding wrap makes of its
// implementation in base — a check in front of the library's own code, as a declaration
// given later replaces the binding of the same overload. It returns no option when base
// declares the function but not the overload, and an error when base lacks the function.
func rebind(base *cel.Env, function, overloadID string, wrap func(*functions.Overload) cel.OverloadOpt) ([]cel.EnvOption, error) {
	decl, ok := base.Functions()[function]
	if !ok {
		return nil, fmt.Errorf("function %s is not in the environment", function)
	}
	bindings, err := decl.Bindings()
	if err != nil {
		return nil, err
	}
	var orig *functions.Overload
	for _, b := range bindings {
		if b.Operator == overloadID {
			orig = b
		}
	}
	var opts []cel.EnvOption
	for _, o := range decl.OverloadDecls() {
		if o.ID() != overloadID || orig == nil {
			continue
		}
		overload := cel.Overload
		if o.IsMemberFunction() {
			overload = cel.MemberOverload
		}
		opts = append(opts, cel.Function(function, overload(overloadID, o.ArgTypes(), o.ResultType(), wrap(orig))))
	}
	return opts, nil
}

// limits bound what a guarded call may produce (checkArgs).
func guardedOverloads(limits Limits) ([]cel.EnvOption, error) {
	base, err := environment.MustBaseEnvSet(LanguageVersion).Env(environment.NewExpressions)
	if err != nil {
		return nil, err
	}
	var opts []cel.EnvOption
	for _, g := range callGuards {
		found, err := rebind(base, g.function, g.overload, func(orig *functions.Overload) cel.OverloadOpt {
			return g.binding(orig, limits)
		})
		if err != nil {
			return nil, err
		}
		opts = append(opts, found...)
	}
	if len(opts) != len(callGuards) {
		return nil, fmt.Errorf("found %d of the %d guarded overloads", len(opts), len(callGuards))
	}
	return opts, nil
}

// binding is orig's implementation behind g's checks. A call may produce at most ten
// characters per unit of the per-call limit: what is charged by its length (format()) can
// never pay for more.
func (g callGuard) binding(orig *functions.Overload, limits Limits) cel.OverloadOpt {
	maxChars := saturatingMul(limits.PerCallCostLimit, 10)
	guard := func(args ...ref.Val) (ref.Val, bool) {
		err := g.check(args)
		if err == nil && g.checkArgs != nil {
			if err = g.checkArgs(args, maxChars); err != nil {
				return types.WrapErr(fmt.Errorf("%s(): %w", g.function, err)), true
			}
		}
		if err != nil {
			if g.refused != nil {
				return g.refused, true
			}
			return types.WrapErr(g.guardError(err)), true
		}
		return nil, false
	}
	switch {
	case orig.Unary != nil:
		return cel.UnaryBinding(func(a ref.Val) ref.Val {
			if v, stop := guard(a); stop {
				return v
			}
			return orig.Unary(a)
		})
	case orig.Binary != nil:
		return cel.BinaryBinding(func(a, b ref.Val) ref.Val {
			if v, stop := guard(a, b); stop {
				return v
			}
			return orig.Binary(a, b)
		})
	}
	return cel.FunctionBinding(func(args ...ref.Val) ref.Val {
		if v, stop := guard(args...); stop {
			return v
		}
		return orig.Function(args...)
	})
}

// literalGuardErrors reports, for an expression being written, each guarded call whose
// arguments are all literals past its bound: it fails whenever it is evaluated (and constant folding evaluates it when the program is planned).
func literalGuardErrors(e ast.Expr) []string {
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
		// Every guard checks only its first argument (the target of a member call).
		if len(args) == 0 || args[0].Kind() != ast.LiteralKind {
			return
		}
		for _, g := range callGuards {
			if g.function != call.FunctionName() || g.refused != nil {
				continue
			}
			if err := g.check([]ref.Val{args[0].AsLiteral()}); err != nil {
				out = append(out, g.guardError(err).Error())
			}
		}
	}))
	return out
}

// guardedLengths are the characters a guarded call reads at most, by overload ID: past
// them it answers false or fails after a length check alone. Their charges, static and at
// run time, are computed on at most this many characters: estimated by the argument's bound
// (a 256 KiB annotation), isIP() was 26,214 units though it never parses more than 45
// characters, and four of them refused a rule (vmipam#15).
var guardedLengths = map[string]uint64{
	"string_to_quantity": maxQuantityLength, "is_quantity_string": maxQuantityLength,
	"string_to_ip": maxIPLength, "is_ip": maxIPLength,
	"string_to_cidr": maxCIDRLength, "is_cidr": maxCIDRLength,
	"string_to_url": maxURLLength, "is_url_string": maxURLLength,
	"string_to_semver": maxSemverLength, "string_bool_to_semver": maxSemverLength,
	"is_semver_string": maxSemverLength, "is_semver_string_bool": maxSemverLength,
}

// semverParses are the overloads that parse a version (blang/semver): its work is a slice,
// a scan and a 32-byte append per pre-release identifier, i.e. up to one per two characters.
var semverParses = map[string]bool{
	"string_to_semver": true, "string_bool_to_semver": true, "is_semver_string": true, "is_semver_string_bool": true,
}

// parseCost is the charge of a guarded parse on a string of n characters, up to the guard's
// bound: ip(), isIP(), cidr(), isCIDR(), url() and isURL() one unit per ten characters, as
// the library charges them (it charges isURL 1 whatever the length); semver() and
// isSemver() one unit per two, the work per character their parse does (the library charges
// a tenth of that: 756–1,095 ns a unit against the calibration's 272 in one run, atk10).
func parseCost(overloadID string, n uint64) uint64 {
	n = min(n, guardedLengths[overloadID])
	if semverParses[overloadID] {
		return 1 + (n+1)/2
	}
	return 1 + traversal(n)
}

// parseCostTrackers charge the guarded parses parseCost at run time, in place of the
// library's charge by the whole argument.
var parseCostTrackers = cel.CostTrackerOptions(
	parseCostTracker("string_to_ip"), parseCostTracker("is_ip"),
	parseCostTracker("string_to_cidr"), parseCostTracker("is_cidr"),
	parseCostTracker("string_to_url"), parseCostTracker("is_url_string"),
	parseCostTracker("string_to_semver"), parseCostTracker("string_bool_to_semver"),
	parseCostTracker("is_semver_string"), parseCostTracker("is_semver_string_bool"),
)

// parseCostTracker charges overloadID parseCost on its argument's length.
func parseCostTracker(overloadID string) interpreter.CostTrackerOption {
	return interpreter.OverloadCostTracker(overloadID, func(args []ref.Val, _ ref.Val) *uint64 {
		cost := parseCost(overloadID, strLen(args[0]))
		return &cost
	})
}

// parseEstimate is the static counterpart of parseCostTrackers; nil for another overload.
// url()'s result is as large as its parsed argument.
func (e estimator) parseEstimate(overloadID string, args []checker.AstNode) *checker.CallEstimate {
	bound, ok := guardedLengths[overloadID]
	if !ok || len(args) == 0 || strings.Contains(overloadID, "quantity") {
		return nil
	}
	n := min(e.stringBound(args[0]), bound)
	est := &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: parseCost(overloadID, n)}}
	if overloadID == "string_to_url" {
		est.ResultSize = &checker.SizeEstimate{Min: 0, Max: n}
	}
	return est
}

// formatCostTracker charges a format() call by the length of what it produced (the library
// charges 1 whatever the output): one unit per ten characters, as for any string traversal;
// and floatClauseCost per %f or %e clause, which the library renders through a locale-aware
// printer at ~0.3–1 ms each on the reference machine (~1 unit per µs, see limits.go).
const floatClauseCost = 1000

// floatClauses counts the %f and %e clauses (with or without a precision) of a format string.
func floatClauses(s string) int {
	n := 0
	for _, c := range formatClauses(s) {
		if c.verb == 'f' || c.verb == 'e' {
			n++
		}
	}
	return n
}

var formatCostTracker = cel.CostTrackerOptions(interpreter.OverloadCostTracker("string_format",
	func(args []ref.Val, result ref.Val) *uint64 {
		cost := uint64(1)
		if s, ok := result.Value().(string); ok {
			cost += uint64(math.Ceil(float64(len(s)) * 0.1))
		}
		if f, ok := args[0].Value().(string); ok {
			cost += floatClauseCost * uint64(floatClauses(f))
		}
		return &cost
	}))

// Static estimate of format(): the output is at most the format string plus each argument
// formatted. A literal argument's length is known; a double formats to at most
// maxFormattedDouble characters with the precision bound; an input field (vm.name,
// vm.annotations['k'], vm.labels) formats to at most its declared bound (formattedInput); any
// other argument to its derived bound (formattedBound), and one the analysis cannot bound to
// at most maxFormattedArg characters: the larger of the longest string an
// input holds (an annotation value, 256 KiB) and a variable's flat bound (1,024 elements of
// 317 characters and separators); a list or map literal its elements' bounds at any depth. A
// computed nested collection is refused in a new expression (nestedFormatErrors) and, in a
// stored one, checked before formatting at run time (formatListArg). Before, any
// non-literal argument was assumed to be ≤ 253 characters, and
// `'%s'.format([vm.annotations['a']])` was charged 10,000 times its estimate at run time.
const (
	maxFormattedDouble = 310 + maxFormatPrecision
	maxFormattedArg    = max(256*1024, variableSizeBound*(variableElemBound+4))
)

func (e estimator) formatEstimate(target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if target == nil || len(args) != 1 {
		return nil
	}
	size, floats := uint64(variableSizeBound), uint64(0)
	if s, ok := literalString((*target).Expr()); ok {
		size, floats = uint64(len(s)), uint64(floatClauses(s))
	} else if est := e.EstimateSize(*target); est != nil {
		size = est.Max
	}
	if !isLiteralString((*target).Expr()) {
		floats = size / 2 // at most one clause every two characters
	}
	// %x and %X render each byte of a string as two characters: an argument formats to twice
	// its length under them (a string estimated at one character a byte was refused at run
	// time by the per-call limit on a within-bounds annotation).
	perChar := hexFactor((*target).Expr())
	if list := args[0].Expr(); list != nil && list.Kind() == ast.ListKind {
		for _, el := range list.AsList().Elements() {
			size = addSaturating(size, saturatingMul(perChar, e.formattedSize(el)))
		}
	} else {
		size = addSaturating(size, saturatingMul(perChar, e.formattedElements(args[0])))
	}
	cost := addSaturating(1+uint64(math.Ceil(float64(size)*0.1)), saturatingMul(floatClauseCost, floats))
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: cost},
		ResultSize: &checker.SizeEstimate{Min: 0, Max: size}}
}

// formattedElements bounds the characters the elements of a computed argument list l
// format to: its derived bound's entries times its longest element when they are flat
// (strings, bytes as hex, scalars); else as many entries as its size estimate, each
// maxFormattedArg long.
func (e estimator) formattedElements(l checker.AstNode) uint64 {
	if b, ok := e.derivedBound(l.Expr()); ok && b.input == nil {
		if t := l.Type(); t != nil && t.Kind() == types.ListKind && len(t.Parameters()) == 1 {
			switch t.Parameters()[0].Kind() {
			case types.StringKind:
				return saturatingMul(b.size, b.elem)
			case types.BytesKind:
				return saturatingMul(b.size, saturatingMul(b.elem, 2))
			case types.BoolKind, types.IntKind, types.UintKind, types.DoubleKind, types.NullTypeKind,
				types.TimestampKind, types.DurationKind:
				return saturatingMul(b.size, maxFormattedDouble)
			}
		}
	}
	entries := uint64(variableSizeBound)
	if est := e.EstimateSize(l); est != nil {
		entries = est.Max
	}
	return saturatingMul(entries, maxFormattedArg)
}

// hexFactor is how many characters a formatted argument may take per character of its %s
// form under the format string e: 2 when e may hold a %x or %X clause (a literal that has
// one, or any non-literal format), 1 otherwise.
func hexFactor(e ast.Expr) uint64 {
	if s, ok := literalString(e); ok && !hasHexClause(s) {
		return 1
	}
	return 2
}

// hasHexClause reports whether the format string s has a %x or %X clause.
func hasHexClause(s string) bool {
	return slices.ContainsFunc(formatClauses(s), func(c formatClause) bool { return c.verb == 'x' || c.verb == 'X' })
}

// formattedSize bounds the characters of one formatted argument. A list or map literal is
// its elements' bounds with brackets and separators, at any depth (before, one was assumed
// as long as a flat variable, and a literal list of three annotation maps was estimated at a
// 300th of what it formats to).
//
// Any other element is sized by its derived bound (formattedBound), as a variable's value is:
// a variable, a concatenation, an optional's value. Before, each was assumed to format to
// maxFormattedArg characters whatever it held, so `'%s'.format([variables.v + variables.v])`
// (524,000 characters) was admitted and then stopped by the per-call limit, and a list
// variable of four 262,000-character strings by the 1,000,000-character guard. Only an
// element the analysis cannot bound is still assumed to be maxFormattedArg long.
func (e estimator) formattedSize(el ast.Expr) uint64 {
	if alts := seeThrough(el); len(alts) != 1 || alts[0] != el {
		size := uint64(0)
		for _, alt := range alts {
			size = max(size, e.formattedSize(alt))
		}
		return size
	}
	switch el.Kind() {
	case ast.ListKind:
		size := uint64(2)
		for _, child := range el.AsList().Elements() {
			size = addSaturating(size, addSaturating(e.formattedSize(child), 2))
		}
		return size
	case ast.MapKind:
		size := uint64(2)
		for _, entry := range el.AsMap().Entries() {
			kv := entry.AsMapEntry()
			size = addSaturating(size, addSaturating(addSaturating(e.formattedSize(kv.Key()), e.formattedSize(kv.Value())), 4))
		}
		return size
	}
	if el.Kind() != ast.LiteralKind {
		if n, _, ok := formattedInput(el); ok {
			return n
		}
		if e.bounds != nil {
			if n, ok := formattedBound(e.scopeOf(el), el); ok {
				return n
			}
		}
		return maxFormattedArg
	}
	switch v := el.AsLiteral().(type) {
	case types.String:
		return uint64(len(v))
	case types.Bytes:
		return 2 * uint64(len(v))
	case types.Double:
		return maxFormattedDouble
	}
	return 64 // an int in binary, a bool, null
}

func isLiteralString(e ast.Expr) bool {
	_, ok := literalString(e)
	return ok
}

func literalString(e ast.Expr) (string, bool) {
	if e == nil || e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// formattedInput bounds the characters of an input field formatted: a string field its
// maxSize, an element of a map or list (m[k], l[i]) its elemMaxSize, a scalar 64, a list or map
// its entries times (key, element and separators); false for anything else.
func formattedInput(el ast.Expr) (uint64, reflect.Kind, bool) {
	index := false
	if el.Kind() == ast.CallKind && el.AsCall().FunctionName() == operators.Index && len(el.AsCall().Args()) == 2 {
		el, index = el.AsCall().Args()[0], true
	}
	path, ok := selectPath(el)
	if !ok {
		return 0, 0, false
	}
	steps := strings.Split(path, ".")
	t := inputVariables[steps[0]]
	var f reflect.StructField
	for _, step := range steps[1:] {
		if f, ok = fieldByJSONName(t, step); !ok {
			return 0, 0, false
		}
		t = f.Type
	}
	bound, elem := sizeTag(f, "maxSize"), cmpOr(sizeTag(f, "elemMaxSize"), defaultElemSize)
	switch k := t.Kind(); {
	case index && (k == reflect.Map || k == reflect.Slice):
		return elem, t.Elem().Kind(), true
	case index:
		return 0, 0, false
	case k == reflect.String && bound > 0:
		return bound, k, true
	case (k == reflect.Map || k == reflect.Slice) && bound > 0:
		return saturatingMul(bound, elem+defaultKeySize+4), k, true
	case k != reflect.Struct && k != reflect.String && k != reflect.Map && k != reflect.Slice:
		return 64, k, true
	}
	return 0, 0, false
}

// stringBound bounds the characters of the string e evaluates to: a literal's length, an
// input string field's or map value's declared bound; false when unknown.
func stringBound(e ast.Expr) (uint64, bool) {
	if alts := seeThrough(e); len(alts) != 1 || alts[0] != e {
		bound := uint64(0)
		for _, alt := range alts {
			n, ok := stringBound(alt)
			if !ok {
				return 0, false
			}
			bound = max(bound, n)
		}
		return bound, true
	}
	if s, ok := literalString(e); ok {
		return uint64(len(s)), true
	}
	if n, k, ok := formattedInput(e); ok && k == reflect.String {
		return n, true
	}
	return 0, false
}

// joinEstimate estimates l.join(sep) where l is a list literal of bounded strings,
// s.split(x) of a bounded string s (at most len(s)+1 parts of len(s) characters in all), or
// any list with a derived bound (size entries of at most elem characters): the library
// cannot bound the elements' sizes and refused them as unbounded. Its cost is the two
// traversals of the result the library charges at run time.
//
// An element that is neither a literal nor an input string is sized by its derived bound
// (a variable, an optional's value, a concatenation): before, `[variables.nm, 'a'].join('-')`
// was left to the library, which cannot size it, and refused at ~1.8e18.
func (e estimator) joinEstimate(target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if target == nil || (*target).Expr() == nil {
		return nil
	}
	sep := uint64(0)
	if len(args) == 1 {
		// A literal separator, or a computed one by its bound (['a', 'b'].join(vm.namespace)
		// was refused at ~3.7e18: issue #15, tester atk13).
		n, ok := e.elementStringBound(args[0].Expr())
		if !ok {
			return nil
		}
		sep = n
	}
	var chars, parts uint64
	switch l := (*target).Expr(); {
	case l.Kind() == ast.ListKind:
		for _, el := range l.AsList().Elements() {
			n, ok := e.elementStringBound(el)
			if !ok {
				return nil
			}
			chars, parts = addSaturating(chars, n), parts+1
		}
	case l.Kind() == ast.CallKind && l.AsCall().FunctionName() == "split" && l.AsCall().IsMemberFunction():
		n, ok := stringBound(l.AsCall().Target())
		if !ok {
			return nil
		}
		chars, parts = n, n+1
	default:
		// Any other list of strings by its derived bound: a comprehension's result, such as
		// vm.labels.map(k, k + '=' + vm.labels[k]), has elements the library cannot size and
		// was refused at ~3.7e18.
		b, ok := e.derivedBound(l)
		if !ok || e.bounds.a.GetType(l.ID()).Kind() != types.ListKind {
			return nil
		}
		chars, parts = saturatingMul(b.size, b.elem), b.size
	}
	size := addSaturating(chars, saturatingMul(parts, sep))
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1 + uint64(math.Ceil(float64(size)*0.2))},
		ResultSize: &checker.SizeEstimate{Min: 0, Max: size}}
}

// elementStringBound bounds the characters of the string el evaluates to: stringBound's, or
// else el's derived bound when el is a string.
func (e estimator) elementStringBound(el ast.Expr) (uint64, bool) {
	if n, ok := stringBound(el); ok {
		return n, true
	}
	if e.bounds == nil {
		return 0, false
	}
	if t := e.bounds.a.GetType(el.ID()); t == nil || t.Kind() != types.StringKind {
		return 0, false
	}
	b, ok := e.derivedBound(el)
	return b.size, ok
}

// orValueEstimate estimates m[?k].orValue(d) for a map of the input and a bounded default:
// constant time, a result as long as the longer of a map value and d.
func orValueEstimate(target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if target == nil || (*target).Expr() == nil || len(args) != 1 {
		return nil
	}
	opt := (*target).Expr()
	if opt.Kind() != ast.CallKind || opt.AsCall().FunctionName() != operators.OptIndex || len(opt.AsCall().Args()) != 2 {
		return nil
	}
	index := ast.NewExprFactory().NewCall(0, operators.Index, opt.AsCall().Args()...)
	value, ok := stringBound(index)
	if !ok {
		return nil
	}
	def, ok := stringBound(args[0].Expr())
	if !ok {
		return nil
	}
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1},
		ResultSize: &checker.SizeEstimate{Min: 0, Max: max(value, def)}}
}

// saturatingMul is a*b, or MaxUint64 when it overflows.
func saturatingMul(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}

// constantCallError evaluates every largest call of e whose operands are all constants (no
// input, no variable, no comprehension) and, for one that fails, returns "<call>: <error>"
// naming the innermost failing call within it; "" when none fails. Such a call fails on
// every evaluation that reaches it (not every evaluation: it may sit in a branch never taken) — a conversion out of range (int(1e30), uint(-1)), bytes
// that are not UTF-8 (string(b'\xff')), a string that is not a number (int('x')) — and the
// environment folds constant calls when it plans a program, whose error then carried no
// call and the wording of a compiler fault ("Internal error"). Each call is evaluated
// within the compiled expression's estimate, which has passed the per-call limit already.
//
// The expression itself, when constant, is planned from checked rather than compiled again:
// checking it twice doubled the compile time of a policy of constant expressions (issue #15).
// Re-checking the parts of e costs at most what checking e did (checkWork) and a little
// (recheckFloor): descending a chain nested 32 deep re-checked most of it at each level, a
// dozen times over; beyond the allowance the failure named is an outer call.
func constantCallError(env *cel.Env, checked *cel.Ast) string {
	e := ast.NavigateAST(checked.NativeRep())
	funcs := env.Functions()
	allowance := checkWork(funcs, e) + recheckFloor
	var calls []ast.NavigableExpr
	constantCalls(e, &calls)
	for _, call := range calls {
		var err error
		if call.ID() == e.ID() {
			err = evalChecked(env, checked)
		} else {
			_, err = evalConstantWithin(env, funcs, call, &allowance)
		}
		if err != nil {
			return innermostFailure(env, funcs, call, err, &allowance)
		}
	}
	return ""
}

// recheckFloor is the checkWork constantCallError may spend on any expression, however
// small: enough to name the innermost failing call of every realistic expression.
const recheckFloor = 10_000

// evalConstantWithin is evalConstant when re-checking e fits in allowance (checkWork), which
// it then spends; evaluated is false when it does not.
func evalConstantWithin(env *cel.Env, funcs map[string]*decls.FunctionDecl, e ast.Expr, allowance *uint64) (evaluated bool, err error) {
	work := checkWork(funcs, e)
	if work > *allowance {
		return false, nil
	}
	*allowance -= work
	return true, evalConstant(env, e)
}

// innermostFailure descends from a failing constant call to the deepest call that fails,
// as far as allowance lets it re-check calls (evalConstantWithin).
func innermostFailure(env *cel.Env, funcs map[string]*decls.FunctionDecl, call ast.NavigableExpr, err error, allowance *uint64) string {
	for _, child := range call.Children() {
		if child.Kind() != ast.CallKind {
			continue
		}
		evaluated, childErr := evalConstantWithin(env, funcs, child, allowance)
		if !evaluated {
			break
		}
		if childErr != nil {
			return innermostFailure(env, funcs, child, childErr, allowance)
		}
	}
	src, _ := parser.Unparse(call, nil)
	return fmt.Sprintf("%s: %v (its operands are constants: it fails whenever it is evaluated, and cel-go folds constant calls "+
		"when it plans the program, so the expression's program cannot be built)", truncate(src), err)
}

// evalConstant evaluates a constant expression on its own; nil when it cannot be rebuilt.
func evalConstant(env *cel.Env, e ast.Expr) error {
	src, err := parser.Unparse(e, nil)
	if err != nil {
		return nil
	}
	checked, iss := env.Compile(src)
	if failed(iss) {
		return nil
	}
	prog, err := env.Program(checked)
	if err == nil {
		_, _, err = prog.Eval(interpreter.EmptyActivation())
	}
	return err
}

// evalChecked plans and evaluates a checked constant expression.
func evalChecked(env *cel.Env, checked *cel.Ast) error {
	prog, err := env.Program(checked)
	if err == nil {
		_, _, err = prog.Eval(interpreter.EmptyActivation())
	}
	return err
}

// constantCalls appends to out the largest calls of e whose operands are all constants, and
// reports whether e itself is constant.
func constantCalls(e ast.NavigableExpr, out *[]ast.NavigableExpr) bool {
	var inner []ast.NavigableExpr
	constant := true
	for _, child := range e.Children() {
		constant = constantCalls(child, &inner) && constant
	}
	switch e.Kind() {
	case ast.IdentKind, ast.ComprehensionKind, ast.UnspecifiedExprKind:
		constant = false
	case ast.CallKind:
		if constant {
			*out = append(*out, e)
			return true
		}
	}
	*out = append(*out, inner...)
	return constant
}

// literalRange is the size of lists.range(n) for a literal n (0 for a negative n); false for
// any other expression. The library leaves its result unsized, so that iterating over
// lists.range(40) was estimated as over an unbounded list.
func literalRange(e ast.Expr) (uint64, bool) {
	if e.Kind() != ast.CallKind || e.AsCall().FunctionName() != "lists.range" || len(e.AsCall().Args()) != 1 {
		return 0, false
	}
	arg := e.AsCall().Args()[0]
	if arg.Kind() != ast.LiteralKind {
		return 0, false
	}
	n, ok := arg.AsLiteral().(types.Int)
	if !ok {
		return 0, false
	}
	return uint64(max(n, 0)), true
}

// rangeEstimate estimates lists.range(n) for a literal n: n elements, built one by one.
func rangeEstimate(args []checker.AstNode) *checker.CallEstimate {
	if len(args) != 1 {
		return nil
	}
	call := ast.NewExprFactory().NewCall(0, "lists.range", args[0].Expr())
	n, ok := literalRange(call)
	if !ok {
		return nil
	}
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1 + n},
		ResultSize: &checker.SizeEstimate{Min: 0, Max: n}}
}

// rangeCostTracker charges lists.range(n) at run time as rangeEstimate does: one unit per
// element built (the library charges 1 for up to a million elements).
var rangeCostTracker = cel.CostTrackerOptions(interpreter.OverloadCostTracker("lists_range",
	func(args []ref.Val, _ ref.Val) *uint64 {
		cost := uint64(1)
		if n, ok := args[0].(types.Int); ok && n > 0 {
			cost += uint64(n)
		}
		return &cost
	}))

// unboundedHint says what an estimate past the limit blames: each range of a comprehension
// whose size the estimate cannot bound — for lists.range(x), the input x it grows with — or
// whose elements it cannot size (the parts of split(): comparing them is unbounded); when
// every range is bounded, that the iterations are too many; without iteration, the calls.
// A range is judged by the estimator itself (probes of it alone), so that the hint and the
// estimate agree: a syntactic rule blamed vm.name.lowerAscii().split(',') as unbounded
// though the estimate had sized it.
//
// vars are the sizes of the variables, named when an expression without iteration reads them.
//
// total is the expression's estimate: elements without a size are blamed only when it is
// unbounded (comparing one with a sized value costs what the sized one does).
func unboundedHint(p *probes, e ast.Expr, total uint64, vars variableSizes) string {
	if !hasComprehension(e) {
		return noIterationHint(p, e, vars)
	}
	var parts []string
	seen := map[string]bool{}
	bound := boundNames(e)
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.ComprehensionKind {
			return
		}
		r := e.AsComprehension().IterRange()
		if r.Kind() == ast.IdentKind && bound[r.AsIdent()] != nil {
			r = bound[r.AsIdent()]
		}
		src, err := parser.Unparse(r, nil)
		if err != nil || seen[src] {
			return
		}
		seen[src] = true
		if part := rangeBlame(p, r, src, total == math.MaxUint64, vars); part != "" {
			parts = append(parts, part)
		}
	}))
	if len(parts) == 0 {
		return "iterate over fewer or smaller lists, or nest fewer iterations"
	}
	return strings.Join(parts, "; ")
}

// boundNames maps each name a binding comprehension in e binds (bindsAccumulator) to the
// expression it names. A macro binds its input under an internal name (sortBy():
// @__sortBy_input__) and iterates over that name: the hint blamed the name, which the user
// never wrote and the estimate had sized, as unbounded (issue #15, tester atk15); it judges
// the bound expression instead.
func boundNames(e ast.Expr) map[string]ast.Expr {
	names := map[string]ast.Expr{}
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(x ast.Expr) {
		if x.Kind() == ast.ComprehensionKind && bindsAccumulator(x.AsComprehension()) {
			names[x.AsComprehension().AccuVar()] = x.AsComprehension().AccuInit()
		}
	}))
	return names
}

// rangeBlame says what is unbounded about the comprehension range r (source src), or "".
// It estimates r alone iterated with a constant body, then comparing its elements; a range
// that does not compile alone (it reads an outer iteration variable) is judged by its form.
func rangeBlame(p *probes, r ast.Expr, src string, elements bool, vars variableSizes) string {
	size := "the size of " + src + " is unbounded: iterate over a declared input, a variable or a literal list"
	if arg, ok := strings.CutPrefix(src, "lists.range("); ok && strings.HasSuffix(arg, ")") {
		size = "the size of " + src + " is unbounded: it grows with the value of " + strings.TrimSuffix(arg, ")") +
			"; give lists.range a literal bound"
	}
	iterated, ok := p.cost("(" + src + ").all(_v, true)")
	if !ok {
		if boundedRange(r) {
			return ""
		}
		return size
	}
	if iterated == math.MaxUint64 {
		return size
	}
	if !elements {
		return ""
	}
	// Compared as the estimate sizes them: an iteration variable by its range's derived bound.
	if compared, ok := p.derivedCost("("+src+").all(_v, _v == _v)", vars); ok && compared == math.MaxUint64 {
		return "the elements of " + src + " have no size the estimate knows (the parts of split(), the results of " +
			"library calls): iterate over a declared input, a variable or a literal list"
	}
	return ""
}

// probes compiles the hints' probe expressions on an allowance of type-checking work
// (checkWork). Each probe checks a part of the refused expression again: a chain of n calls
// over a costly operand checked that operand n times, outside MaxPolicyCheckWork — 4.3–5.6 s
// of CPU for one refused 4.6 KB expression, past the webhook's 5 s (issue #15, tester atk12
// finding 2). The allowance is the refused expression's own check work, so its hint costs at
// most as much again; a probe past it is not compiled and counts as one that does not compile
// (the hint falls back to the expression's form).
type probes struct {
	env  *cel.Env
	left uint64
}

// newProbes returns the probes of a hint about the checked expression e.
func newProbes(env *cel.Env, e ast.Expr) *probes {
	return &probes{env: env, left: checkWork(env.Functions(), e)}
}

// compile parses and checks src within what is left of the allowance.
func (p *probes) compile(src string) (*cel.Ast, bool) {
	if p.left == 0 {
		return nil, false // spent: not even parsed
	}
	parsed, iss := p.env.Parse(src)
	if failed(iss) {
		return nil, false
	}
	work := checkWork(p.env.Functions(), parsed.NativeRep().Expr())
	if work > p.left {
		p.left = 0
		return nil, false
	}
	p.left -= work
	checked, iss := p.env.Check(parsed)
	if failed(iss) {
		return nil, false
	}
	return checked, true
}

// derivedCost is cost with the estimator of a policy's expressions, which derives the bounds
// of subexpressions (estimatorOf), with the variables' sizes vars.
func (p *probes) derivedCost(src string, vars variableSizes) (uint64, bool) {
	checked, ok := p.compile(src)
	if !ok {
		return 0, false
	}
	est, err := p.env.EstimateCost(checked, estimatorOf(checked.NativeRep(), vars))
	if err != nil {
		return 0, false
	}
	return est.Max, true
}

// cost is the estimated worst-case cost of src; false when it does not compile (or is past
// the allowance).
func (p *probes) cost(src string) (uint64, bool) {
	checked, ok := p.compile(src)
	if !ok {
		return 0, false
	}
	est, err := p.env.EstimateCost(checked, costEstimator)
	if err != nil {
		return 0, false
	}
	return est.Max, true
}

// formatListArg bounds the characters format()'s argument list formats to, before the
// library formats it: the cost tracker charges the output after it is built, so a nested
// collection of megabytes was formatted in full and only then failed the per-call limit,
// with an error that did not name format().
func formatListArg(args []ref.Val, maxChars uint64) error {
	if len(args) < 2 {
		return nil
	}
	limit := maxChars
	if f, ok := args[0].Value().(string); ok && hasHexClause(f) {
		limit = maxChars / 2 // each byte of a string renders as two characters
	}
	if n := formattedLength(args[1], limit); n > limit {
		return fmt.Errorf("the arguments format to more than %d characters, what one call may produce within the per-call cost limit", maxChars)
	}
	return nil
}

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

// nestedFormatErrors reports each format() call of a checked expression formatting a
// collection of collections that the expression computes (a comprehension's result, a
// variable): the estimate knows the bounds of literals and inputs at any depth, but not the
// depth or sizes of a computed value, which can format to far more than its flat bound.
func nestedFormatErrors(checked *cel.Ast) []string {
	var out []string
	a := checked.NativeRep()
	var visitArg func(e ast.Expr)
	visitArg = func(e ast.Expr) {
		if alts := seeThrough(e); len(alts) != 1 || alts[0] != e {
			for _, alt := range alts {
				visitArg(alt)
			}
			return
		}
		switch e.Kind() {
		case ast.LiteralKind:
			return
		case ast.ListKind:
			for _, el := range e.AsList().Elements() {
				visitArg(el)
			}
			return
		case ast.MapKind:
			for _, entry := range e.AsMap().Entries() {
				visitArg(entry.AsMapEntry().Key())
				visitArg(entry.AsMapEntry().Value())
			}
			return
		}
		if _, _, ok := formattedInput(e); ok {
			return
		}
		if t := a.GetType(e.ID()); t != nil && (nestedCollection(t) || unknownShape(t)) {
			out = append(out, nestedFormatError(a, e, t))
		}
	}
	ast.PreOrderVisit(a.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind || e.AsCall().FunctionName() != "format" || !e.AsCall().IsMemberFunction() || len(e.AsCall().Args()) != 1 {
			return
		}
		list := e.AsCall().Args()[0]
		if list.Kind() == ast.ListKind {
			visitArg(list)
			return
		}
		// A computed argument list: each of its elements is formatted.
		if t := a.GetType(list.ID()); t != nil && t.Kind() == types.ListKind && len(t.Parameters()) == 1 &&
			(isCollection(t.Parameters()[0]) || unknownShape(t.Parameters()[0])) {
			out = append(out, nestedFormatError(a, list, t))
		}
	}))
	return out
}

// seeThrough is the expressions whose value e may be, looking through the wrappers that
// hide a value's shape from our AST sizers: dyn(x) is x, c ? a : b is a or b, at any depth;
// e itself otherwise. Without it, `'%s'.format([dyn([vm.labels, …])])` was sized as one
// computed flat argument and admitted, then failed at run time on labels within their bounds.
// (Parentheses leave no node in CEL's AST.)
func seeThrough(e ast.Expr) []ast.Expr {
	if e.Kind() != ast.CallKind {
		return []ast.Expr{e}
	}
	call := e.AsCall()
	switch {
	case call.FunctionName() == overloads.TypeConvertDyn && len(call.Args()) == 1 && !call.IsMemberFunction():
		return seeThrough(call.Args()[0])
	case call.FunctionName() == operators.Conditional && len(call.Args()) == 3:
		return append(seeThrough(call.Args()[1]), seeThrough(call.Args()[2])...)
	}
	return []ast.Expr{e}
}

// nestedFormatError names the argument e of type t: its source when it unparses (the
// environment keeps no macro calls, so a comprehension does not), else its position.
func nestedFormatError(a *ast.AST, e ast.Expr, t *types.Type) string {
	what, err := parser.Unparse(e, nil)
	if err != nil {
		// The leftmost position of the argument's parts: a comprehension's own is its macro's.
		start := int32(math.MaxInt32)
		ast.PreOrderVisit(e, ast.NewExprVisitor(func(d ast.Expr) {
			if r, ok := a.SourceInfo().GetOffsetRange(d.ID()); ok && r.Start >= 0 {
				start = min(start, r.Start)
			}
		}))
		loc := a.SourceInfo().GetLocationByOffset(start)
		what = fmt.Sprintf("at %d:%d", loc.Line(), loc.Column()+1)
	} else {
		what = truncate(what)
	}
	shape := "a computed nested collection"
	if strings.Contains(t.String(), "dyn") || strings.Contains(t.String(), "any") {
		shape = "computed and of a shape its type does not say"
	}
	return fmt.Sprintf("format(): the argument %s is %s (%s): its formatted size has no bound "+
		"the estimate knows; format its elements, or join them into strings first", what, shape, t)
}

// nestedCollection: t is a list or map holding lists or maps, or values of a shape the type
// does not say (dyn): unknown is treated as unbounded, not as small.
func nestedCollection(t *types.Type) bool {
	if !isCollection(t) {
		return false
	}
	for _, p := range t.Parameters() {
		if isCollection(p) || unknownShape(p) {
			return true
		}
	}
	return false
}

// unknownShape: a value of type t may be anything, a nested collection included.
func unknownShape(t *types.Type) bool { return t.Kind() == types.DynKind || t.Kind() == types.AnyKind }

func isCollection(t *types.Type) bool { return t.Kind() == types.ListKind || t.Kind() == types.MapKind }

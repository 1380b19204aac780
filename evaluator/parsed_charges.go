package evaluator

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"k8s.io/apimachinery/pkg/api/resource"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// Methods of the values the Kubernetes libraries parse (url(), semver(), ip(), cidr(),
// quantity(), format.named()). The parse is charged by the text's length, once; the
// library charges every method 1 (cost.go), but a value is reused — a variable, a list
// element — and some methods redo work that grows with it on every call (issue #15, tester
// atk7 finding 2). Those are charged here by the value's size, statically
// (parsedValueEstimate, from the receiver's derived bound: the characters of the text it
// was parsed from, parsedTextBound) and at run time (parsedValueCost), in one formula:
//
//   - url getQuery() parses RawQuery again and builds a map of a list per parameter (a
//     2,040-character query of 400 parameters: ~31–150 µs a call, charged 1): one traversal
//     of the query plus queryParamCost a parameter (at most (len + 1) / 2 of them);
//   - url getEscapedPath() re-escapes the path (up to three characters a character): one
//     traversal of RawPath and of the result; getHostname() and getPort() split the host
//     at its last ':': one traversal of the host;
//   - url `==`/`!=` serializes both URLs (URL.String(), escaping each part): one traversal
//     of three characters per character of their parts;
//   - semver compareTo(), isGreaterThan(), isLessThan(), `==`, `!=` walk the pre-release
//     identifiers both versions share (90,000 of them: ~0.6 ms a call, charged 1): a tenth
//     of a unit an identifier plus compareCost of the characters compared;
//   - quantity `==`/`!=` compare two decimals as compareTo() does: quantityOpCost
//     (quantity_charges.go), also for a call dispatched at run time (a dyn receiver), which
//     the overload trackers keyed by ID do not see;
//   - format.named(name) looks name up in a map, hashing it: keyCost, as `key in map`.
//
// The other methods read a field or work on at most 16 bytes (getScheme, getHost, major,
// minor, patch, every ip and cidr method — netip values), or are charged already (quantity
// operations, format validate(), the parses themselves: guards.go, charges.go).

// queryParamCost is what one parameter of getQuery()'s result costs on top of the
// traversal: unescaping its key and value, a list and a map entry (~80–370 ns measured
// under load, atk7 50- and 55-url-getquery).
const queryParamCost = 2

// maxSemverText is the text a semver value is assumed parsed from when its derived bound
// is unknown: semver() parses at most maxSemverLength characters (guards.go).
const maxSemverText = maxSemverLength

// queryCost is the charge of getQuery() on a RawQuery of n characters holding at most
// params parameters: a parameter needs a character and, but for the last, a separator.
func queryCost(n, params uint64) uint64 {
	params = min(params, (n+1)/2)
	return addSaturating(1+traversal(n), saturatingMul(queryParamCost, params))
}

// escapedPathCost is the charge of getEscapedPath() reading a RawPath of raw characters
// and producing out characters.
func escapedPathCost(raw, out uint64) uint64 { return 1 + traversal(addSaturating(raw, out)) }

// urlEqualCost is the charge of comparing two URLs whose parts hold na and nb characters:
// each is serialized, escaped (up to three characters a character).
func urlEqualCost(na, nb uint64) uint64 {
	return 1 + traversal(saturatingMul(3, addSaturating(na, nb)))
}

// semverCompareCost is the charge of comparing two versions sharing ids pre-release
// identifiers whose compared characters total chars.
func semverCompareCost(ids, chars uint64) uint64 {
	return addSaturating(1+traversal(ids), compareCost(chars))
}

// urlChars is the characters of u's parts, what URL.String() escapes: at most twice the
// text it was parsed from (a path or fragment is kept raw and unescaped).
func urlChars(u *url.URL) uint64 {
	n := len(u.Scheme) + len(u.Opaque) + len(u.Host) + len(u.Path) + len(u.RawPath) +
		len(u.RawQuery) + len(u.Fragment) + len(u.RawFragment)
	if u.User != nil {
		p, _ := u.User.Password()
		n += len(u.User.Username()) + len(p)
	}
	return uint64(n)
}

// sharedPreRelease is how many pre-release identifiers a and b share and the characters
// comparing them walks at most.
func sharedPreRelease(a, b apiservercel.Semver) (ids, chars uint64) {
	n := min(len(a.Pre), len(b.Pre))
	for i := range n {
		chars += uint64(min(len(a.Pre[i].VersionStr), len(b.Pre[i].VersionStr)))
	}
	return uint64(n), chars
}

// parsedValueCost is the run-time charge of function on args (result) when it is one of
// the methods above (false otherwise). It is keyed by function name and argument values, so
// that a call dispatched at run time is charged too.
func parsedValueCost(function string, args []ref.Val, result ref.Val) (uint64, bool) {
	if len(args) == 0 {
		return 0, false
	}
	// A switch, not a map lookup: this runs for every call the overload trackers leave.
	switch function {
	case "getQuery":
		if u, ok := args[0].Value().(*url.URL); ok {
			n := uint64(len(u.RawQuery))
			return queryCost(n, uint64(strings.Count(u.RawQuery, "&"))+1), true
		}
	case "getEscapedPath":
		if u, ok := args[0].Value().(*url.URL); ok {
			return escapedPathCost(uint64(len(u.RawPath)), strLen(result)), true
		}
	case "getHostname", "getPort":
		if u, ok := args[0].Value().(*url.URL); ok {
			return 1 + traversal(uint64(len(u.Host))), true
		}
	case "format.named":
		return keyCost(strLen(args[0])), true
	case operators.Equals, operators.NotEquals, "compareTo", "isGreaterThan", "isLessThan",
		"sign", "asInteger", "isInteger", "asApproximateFloat", "add", "sub":
		return parsedCompareCost(function, args)
	}
	return 0, false
}

// parsedCompareCost is the run-time charge of comparing (or, for quantities, operating on)
// two parsed values.
func parsedCompareCost(function string, args []ref.Val) (uint64, bool) {
	if a, ok := args[0].(apiservercel.Semver); ok && len(args) == 2 {
		if b, ok := args[1].(apiservercel.Semver); ok {
			return semverCompareCost(sharedPreRelease(a, b)), true
		}
	}
	switch a := args[0].Value().(type) {
	case *resource.Quantity:
		return quantityOpCost, true
	case *url.URL:
		if len(args) != 2 || (function != operators.Equals && function != operators.NotEquals) {
			break
		}
		if b, ok := args[1].Value().(*url.URL); ok {
			return urlEqualCost(urlChars(a), urlChars(b)), true
		}
	}
	return 0, false
}

// parsedValueEstimate is the static counterpart of parsedValueCost for overloadID; nil for
// another call. A receiver is sized by the text it was parsed from (parsedTextBound).
func (e estimator) parsedValueEstimate(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	all := args
	if target != nil {
		all = append([]checker.AstNode{*target}, args...)
	}
	if len(all) == 0 {
		return nil
	}
	var cost uint64
	switch overloadID {
	case "url_get_query":
		n := e.parsedText(all[0], maxURLLength)
		cost = queryCost(n, n)
	case "url_get_escaped_path":
		n := e.parsedText(all[0], maxURLLength)
		est := &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: escapedPathCost(n, saturatingMul(3, n))},
			ResultSize: &checker.SizeEstimate{Min: 0, Max: saturatingMul(3, n)}}
		return est
	case "url_get_hostname", "url_get_port":
		cost = 1 + traversal(e.parsedText(all[0], maxURLLength))
	case "format-named":
		cost = keyCost(e.argBound(all[0]))
	case "semver_compare_to", "semver_is_greater_than", "semver_is_less_than":
		cost = e.semverEstimate(all)
	default:
		if function != operators.Equals && function != operators.NotEquals || len(all) != 2 {
			return nil
		}
		switch parsedType(all[0]) {
		case apiservercel.QuantityType.TypeName():
			return quantityOpEstimate
		case apiservercel.SemverType.TypeName():
			cost = e.semverEstimate(all)
		case apiservercel.URLType.TypeName():
			// Parts of at most twice the text (urlChars).
			cost = urlEqualCost(saturatingMul(2, e.parsedText(all[0], maxURLLength)), saturatingMul(2, e.parsedText(all[1], maxURLLength)))
		default:
			return nil
		}
	}
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: cost}}
}

// semverEstimate bounds semverCompareCost of two versions parsed from texts of at most the
// operands' bounds: an identifier takes a character and a separator.
func (e estimator) semverEstimate(all []checker.AstNode) uint64 {
	if len(all) != 2 {
		return 1
	}
	return semverBound(min(e.parsedText(all[0], maxSemverText), e.parsedText(all[1], maxSemverText)))
}

// semverBound bounds semverCompareCost of two versions one of which was parsed from at most
// m characters: an identifier takes a character and a separator.
func semverBound(m uint64) uint64 { return semverCompareCost((m+1)/2, m) }

// parsedType is the type name of a when it is a URL, Semver or Quantity ("" otherwise).
func parsedType(a checker.AstNode) string {
	t := a.Type()
	if t == nil || t.Kind() != types.StructKind {
		return ""
	}
	return t.TypeName()
}

// parsedText bounds the characters of the text the URL or Semver value a was parsed from:
// its derived bound (parsedTextBound), at most ceiling, the longest a value of its kind
// can have (a receiver typed dyn, a variable's, is sized by the method's overload).
func (e estimator) parsedText(a checker.AstNode, ceiling uint64) uint64 {
	if b, ok := e.derivedBound(a.Expr()); ok && b.size > 0 {
		return min(b.size, ceiling)
	}
	return ceiling
}

// parsedTextCeiling is the longest text a value of type t can have been parsed from: a URL
// the guard's maxURLLength, a Semver maxSemverText; 0 for another type.
func parsedTextCeiling(t *types.Type) uint64 {
	if t == nil {
		return 0
	}
	switch t.TypeName() {
	case apiservercel.URLType.TypeName():
		return maxURLLength
	case apiservercel.SemverType.TypeName():
		return maxSemverText
	}
	return 0
}

// parsedCompare adds the static charge of `a == b` or `a != b` between operands typed dyn
// (a variable holding a URL or Semver is declared dyn), which cel-go estimates as a
// comparison of scalars: the dearer of comparing two versions and two URLs parsed from
// texts of the operands' derived bounds (the ceilings when none), times iterations.
// Operands of the same library type are the estimator's (parsedValueEstimate); an operand of
// any other type cannot hold a parsed value.
func (w *deepWalk) parsedCompare(env boundEnv, call ast.CallExpr, iterations uint64, known bool) {
	if fn := call.FunctionName(); (fn != operators.Equals && fn != operators.NotEquals) || len(call.Args()) != 2 || !known {
		return
	}
	dyn := false
	texts := [2][2]uint64{} // [operand][semver, url]
	for i, x := range call.Args() {
		t := w.a.GetType(x.ID())
		switch {
		case t == nil:
			return
		case t.Kind() == types.DynKind || t.Kind() == types.AnyKind:
			dyn = true
		case parsedTextCeiling(t) == 0:
			return
		}
		texts[i] = [2]uint64{maxSemverText, maxURLLength}
		if b, ok := deriveBound(env, x); ok && b.size > 0 {
			texts[i] = [2]uint64{min(b.size, maxSemverText), min(b.size, maxURLLength)}
		}
	}
	if !dyn {
		return
	}
	semverCost := semverBound(min(texts[0][0], texts[1][0]))
	urlCost := urlEqualCost(saturatingMul(2, texts[0][1]), saturatingMul(2, texts[1][1]))
	loc := w.a.SourceInfo().GetStartLocation(call.Args()[0].ID())
	w.add(fmt.Sprintf("%s at %d:%d", strings.Trim(call.FunctionName(), "_"), loc.Line(), loc.Column()+1),
		max(semverCost, urlCost, quantityOpCost), iterations)
}

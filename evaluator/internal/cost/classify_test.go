package cost

import (
	"slices"
	"sort"
	"strings"
	"testing"
)

// class is how one function or overload of the environment is bounded.
type class string

const (
	// guarded: a guard of this package checks the call before it runs (guards.go, deep.go,
	// regex.go, zones.go, concat.go).
	guarded class = "guarded"
	// charged: cel-go or the Kubernetes library charges its work, which is constant or linear
	// in values the other bounds hold (input bounds, guarded parses, the per-call limit on
	// what builds them), and one call of it is short.
	charged class = "charged"
	// unusable: no expression can call it (no receiver of its type is declared).
	unusable class = "unusable"
)

// classification is the survey of every function of the environment, by function name, with
// "function/overload" entries for the overloads classed apart. A function or overload missing
// here fails TestEveryOverloadIsClassified: read its implementation before classing it
// (doc.go, "Upgrading").
var classification = map[string]class{
	// Operators and macros' helpers: constant, or linear in the strings they compare.
	"!_": charged, "-_": charged, "_%_": charged, "_*_": charged, "_/_": charged, "_-_": charged,
	"_&&_": charged, "_||_": charged, "_?_:_": charged, "@not_strictly_false": charged,
	"__not_strictly_false__": charged, "_<_": charged, "_<=_": charged, "_>_": charged, "_>=_": charged,
	"_?._": charged, "_[?_]": charged, "_[_]": charged, "cel.@mapInsert": charged,
	"_+_": charged, "_+_/add_list": guarded, // list `+` is built flat, charged by its copy
	// Comparisons walk nested values and compare strings: checkedOperator, deepCalls.
	"_==_": guarded, "_!=_": guarded, "@in": guarded, "_in_": guarded, "in": guarded,
	"distinct": guarded, "flatten": guarded, "includes": guarded,
	"sets.contains": guarded, "sets.equivalent": guarded, "sets.intersects": guarded,
	"indexOf": guarded, "lastIndexOf": guarded, // string searches: searchSteps; lists: deepCalls
	// Parses whose work grows with the value: bounded lengths (and exponent), callGuards.
	"quantity": guarded, "isQuantity": guarded, "ip": guarded, "ip/cidr_ip": charged, "isIP": guarded,
	"ip.isCanonical": guarded, "cidr": guarded, "isCIDR": guarded, "url": guarded, "isURL": guarded,
	"semver": guarded, "isSemver": guarded,
	"containsIP": charged, "containsIP/cidr_contains_ip_string": guarded,
	"containsCIDR": charged, "containsCIDR/cidr_contains_cidr_string": guarded,
	// Calls whose output or work one call does without a charge bounding it first.
	"format": guarded, "replace": guarded, "join": guarded, "validate": guarded,
	"matches": guarded, "find": guarded, "findAll": guarded, // regexOptimizations
	"sort": guarded, "@sortByAssociatedKeys": guarded,
	// Accessors of values the guards bound (a Quantity within ±64 digits, a Semver within
	// 1,024 characters, a URL within 2,048, an IP, a CIDR).
	"add": charged, "sub": charged, "sign": charged, "asInteger": charged, "asApproximateFloat": charged,
	"isInteger": charged, "compareTo": charged, "isGreaterThan": charged, "isLessThan": charged,
	"major": charged, "minor": charged, "patch": charged, "family": charged, "isGlobalUnicast": charged,
	"isLinkLocalMulticast": charged, "isLinkLocalUnicast": charged, "isLoopback": charged,
	"isUnspecified": charged, "masked": charged, "prefixLength": charged, "getEscapedPath": charged,
	"getHost": charged, "getHostname": charged, "getPort": charged, "getQuery": charged, "getScheme": charged,
	// Conversions and string functions: linear in their argument, charged by the library or
	// cel-go (or, charAt and size, constant charges for a linear rune conversion within a
	// call the deadline interrupts between).
	"bool": charged, "bytes": charged, "double": charged, "duration": charged, "int": charged,
	"timestamp": charged, "uint": charged, "string": charged, "dyn": charged, "type": charged,
	"charAt": charged, "contains": charged, "endsWith": charged, "startsWith": charged,
	"lowerAscii": charged, "upperAscii": charged, "substring": charged, "trim": charged,
	"split": charged, "strings.quote": charged, "size": charged,
	// Lists: linear, charged by their size (lists.range(n) n, at most 1,000,000, by cel-go).
	"first": charged, "last": charged, "reverse": charged, "slice": charged, "lists.range": charged,
	"max": charged, "min": charged, "sum": charged, "isSorted": charged,
	// Optionals: constant.
	"hasValue": charged, "optional.none": charged, "optional.of": charged, "optional.ofNonZeroValue": charged,
	"optional.unwrap": charged, "or": charged, "orValue": charged, "value": charged, "unwrapOpt": charged,
	// Named formats: constant lookups (their validate() is guarded).
	"format.byte": charged, "format.date": charged, "format.datetime": charged, "format.dns1035Label": charged,
	"format.dns1035LabelPrefix": charged, "format.dns1123Label": charged, "format.dns1123LabelPrefix": charged,
	"format.dns1123Subdomain": charged, "format.dns1123SubdomainPrefix": charged, "format.labelValue": charged,
	"format.named": charged, "format.qualifiedName": charged, "format.uri": charged, "format.uuid": charged,
	// Timestamp accessors: constant; given a time zone, the name's load is kept (zones.go).
	"getDate": charged, "getDayOfMonth": charged, "getDayOfWeek": charged, "getDayOfYear": charged,
	"getFullYear": charged, "getHours": charged, "getMilliseconds": charged, "getMinutes": charged,
	"getMonth": charged, "getSeconds": charged,
	"getDate/timestamp_to_day_of_month_1_based_with_tz": guarded, "getDayOfMonth/timestamp_to_day_of_month_with_tz": guarded,
	"getDayOfWeek/timestamp_to_day_of_week_with_tz": guarded, "getDayOfYear/timestamp_to_day_of_year_with_tz": guarded,
	"getFullYear/timestamp_to_year_with_tz": guarded, "getHours/timestamp_to_hours_with_tz": guarded,
	"getMilliseconds/timestamp_to_milliseconds_with_tz": guarded, "getMinutes/timestamp_to_minutes_with_tz": guarded,
	"getMonth/timestamp_to_month_with_tz": guarded, "getSeconds/timestamp_to_seconds_tz": guarded,
	// Authorization: the library's receivers come from an `authorizer` variable, which the
	// environment does not declare.
	"allowed": unusable, "check": unusable, "error": unusable, "errored": unusable, "reason": unusable,
	"fieldSelector": unusable, "labelSelector": unusable, "group": unusable, "name": unusable,
	"namespace": unusable, "path": unusable, "resource": unusable, "serviceAccount": unusable,
	"subresource": unusable,
}

// Every function and overload of the compiled environment is classified, so that a cel-go,
// Kubernetes library or language-version upgrade cannot add one unexamined; every entry of the
// survey exists (a stale entry hides a renamed function); and every overload classed guarded
// is guarded by this package.
func TestEveryOverloadIsClassified(t *testing.T) {
	env := testEnv(t, testConfig())
	guards := guardedOverloadIDs(t)
	seen := map[string]bool{}
	var unclassified []string
	for name, fn := range env.Functions() {
		for _, o := range fn.OverloadDecls() {
			key := name + "/" + o.ID()
			c, ok := classification[key]
			seen[key] = ok
			if !ok {
				c, ok = classification[name]
				seen[name] = seen[name] || ok
			}
			switch {
			case !ok:
				unclassified = append(unclassified, key)
			case c == guarded && !guards[o.ID()] && !guards[name]:
				t.Errorf("%s is classed guarded, but no guard of this package checks it", key)
			}
		}
	}
	sort.Strings(unclassified)
	if len(unclassified) > 0 {
		t.Errorf("%d overloads have no classification (classify_test.go): %s", len(unclassified), strings.Join(unclassified, ", "))
	}
	for key := range classification {
		if !seen[key] {
			t.Errorf("%s is classified but not in the environment", key)
		}
	}
}

// guardedOverloadIDs are the overload IDs (or, for a function guarded whole, the function
// names) this package's guards check.
func guardedOverloadIDs(t *testing.T) map[string]bool {
	out := map[string]bool{"equals": true, "not_equals": true, "in_list": true, "in_map": true, "add_list": true}
	for _, g := range callGuards {
		if len(g.overloads) == 0 {
			out[g.function] = true
		}
		for _, id := range g.overloads {
			out[id] = true
		}
	}
	for _, d := range deepCalls {
		out[d.overload] = true
	}
	for _, r := range regexMatchers {
		out[r.overload] = true
	}
	if !slices.ContainsFunc(callGuards, func(g callGuard) bool { return g.function == "sort" }) {
		t.Error("sort() is not guarded")
	}
	return out
}

package evaluator

import (
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apiserver/pkg/cel/library"
)

// Standard functions that cel-go and the Kubernetes library charge one unit whatever their
// string argument, though their work grows with its length or is heavy per call. Each is
// charged here, statically (linearCallEstimate) and at run time (linearCosts), with one
// formula:
//
//   - int(), uint(), double(), bool(), duration() and timestamp() of a string parse it, and
//     on failure strconv copies it into its error (timestamp() quotes it): one traversal
//     (duration() of a 256 KiB "0s0s…" took ~3.6 ms for 1 unit; double() of a 262,000-
//     character value allocated 262 KB per call);
//   - size() of a string counts its runes: one unit per runeCharsPerUnit characters;
//   - `key in map` hashes the key (and compares it to an equal one): one unit per
//     keyCharsPerUnit characters of the key (9,000 lookups of a 262,000-character key took
//     0.4-0.9 s for 270,000 units); `m[k]` and `m[?k]` are estimated so (indexEstimate) but
//     cannot be charged at run time;
//   - the timestamp accessors with a time zone (getHours('Europe/Berlin'), …) load the zone
//     on every call (time.LoadLocation reads and parses the tz database, ~40 KB): tzLoadCost
//     units plus one traversal of the name; a numeric offset ('+02:00') is parsed only: one
//     traversal.
//
// The run-time side is an interpreter.ActualCostEstimator in front of the Kubernetes
// library's, keyed by function name and argument values rather than by overload ID, so that a
// call dispatched at run time (a dyn argument, no single overload) is charged too.

// tzLoadCost is what loading a time zone by name costs on top of the call: ~12 µs for a zone
// in /usr/share/zoneinfo, ~40 µs and ~40 KB allocated for an absent name, which tries every
// source, Go's zoneinfo.zip included (BenchmarkCostCalibration "time-zone", "time-zone-absent",
// at load average ~9: 70 and 227 ns a unit, where building a map measured 366); 170 units
// keep the absent name under the worst construct's rate.
const tzLoadCost = 170

// linearCostOverloads are the overload IDs linearCallEstimate charges, by function.
var linearCostOverloads = map[string]bool{
	overloads.StringToInt: true, overloads.StringToUint: true, overloads.StringToDouble: true,
	overloads.StringToBool: true, overloads.StringToDuration: true, overloads.StringToTimestamp: true,
	overloads.SizeString: true, overloads.SizeStringInst: true, overloads.InMap: true,
	overloads.TimestampToYearWithTz: true, overloads.TimestampToMonthWithTz: true,
	overloads.TimestampToDayOfYearWithTz: true, overloads.TimestampToDayOfMonthZeroBasedWithTz: true,
	overloads.TimestampToDayOfMonthOneBasedWithTz: true, overloads.TimestampToDayOfWeekWithTz: true,
	overloads.TimestampToHoursWithTz: true, overloads.TimestampToMinutesWithTz: true,
	overloads.TimestampToSecondsWithTz: true, overloads.TimestampToMillisecondsWithTz: true,
}

// keyCharsPerUnit is how many characters of a key one unit pays for when a map looks it up:
// hashing runs at tens of GB/s, a traversal's tenth of a unit per character would refuse
// `key in map` on any annotation value. Looking a 70,000-character key up costs ~70 units
// (BenchmarkCostCalibration "map-key-hash").
const keyCharsPerUnit = 1024

// mapIndexes are the overloads looking a key up in a map (`m[k]`, `m[?k]`, and both on an
// optional map), by function.
var mapIndexes = map[string]string{
	overloads.IndexMap: operators.Index, "optional_map_index_value": operators.Index,
	"map_optindex_optional_value": operators.OptIndex, "optional_map_optindex_optional_value": operators.OptIndex,
}

// indexEstimate is the estimate of `m[k]` or `m[?k]` with a string key: one unit per
// keyCharsPerUnit characters of the key on top of the index's unit. The interpreter plans an
// index as a qualifier of an attribute, which no cost tracker sees, so it is charged 1 at run
// time whatever the key; the work of the lookups an admitted expression makes is bounded by
// this estimate instead (a missing key is also formatted whole into cel-go's error: a lookup
// of a 262,000-character key took ~40-50 µs, for one unit). nil otherwise (the library's
// estimate, and cel-go's result size, stand).
func (e estimator) indexEstimate(function, overloadID string, args []checker.AstNode) *checker.CallEstimate {
	if len(args) != 2 {
		return nil
	}
	if k := args[1].Type().Kind(); k != types.StringKind && k != types.BytesKind && k != types.DynKind && k != types.AnyKind {
		return nil
	}
	est := checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: 1}}
	if base := e.lib.EstimateCallCost(function, overloadID, nil, args); base != nil {
		est = *base
	}
	est.Max = addSaturating(est.Max, e.argBound(args[1])/keyCharsPerUnit)
	return &est
}

// keyCost is the charge of looking a key of n characters up in a map.
func keyCost(n uint64) uint64 { return 1 + (n+keyCharsPerUnit-1)/keyCharsPerUnit }

// runeCharsPerUnit is how many characters of a string one unit pays for when size() counts
// its runes: ~2.4 ns a character of two-byte runes on a loaded machine, so 32 characters a
// unit measure ~75 ns a unit, against the ~320–380 ns of the worst construct
// (BenchmarkCostCalibration "size-runes"). A traversal's 0.1 a character would refuse
// `s.size()` of any string the checker cannot size in a loop of a few iterations.
const runeCharsPerUnit = 32

// runeCountCost is the charge of size() of a string of n characters (bytes).
func runeCountCost(n uint64) uint64 { return 1 + (n+runeCharsPerUnit-1)/runeCharsPerUnit }

// argBound bounds the length of a string argument: the size the checker computed for it (a
// concatenation, a call the estimator sizes: lowerAscii(), join(), format(), …), else
// stringBound (a literal, an input or variable path, else the largest string the
// estimate assumes).
func (e estimator) argBound(a checker.AstNode) uint64 {
	if n, ok := e.computedBytes(a); ok {
		if _, literal := literalString(a.Expr()); !literal {
			return n
		}
	}
	return e.stringBound(a)
}

// tzCost is the charge of a timestamp accessor given the time zone tz: a name is loaded, an
// offset (it holds ':') parsed.
func tzCost(tz string, n uint64) uint64 {
	cost := 1 + traversal(n)
	if !strings.Contains(tz, ":") {
		cost += tzLoadCost
	}
	return cost
}

// linearCosts is the run-time cost estimator: linearCost, else the Kubernetes library's.
type linearCosts struct {
	lib interpreter.ActualCostEstimator
}

var _ interpreter.ActualCostEstimator = linearCosts{}

// linearCostTracking installs linearCosts as the programs' run-time cost estimator, in place
// of the library's it delegates to.
var linearCostTracking = cel.CostTracking(linearCosts{lib: &library.CostEstimator{}})

// CallCost implements interpreter.ActualCostEstimator.
func (l linearCosts) CallCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64 {
	if cost, ok := linearCost(function, args); ok {
		return &cost
	}
	if cost, ok := parsedValueCost(function, args, result); ok {
		return &cost
	}
	return l.lib.CallCost(function, overloadID, args, result)
}

// linearCost is the run-time charge of function on args when it is one linearCallEstimate
// charges (false otherwise).
func linearCost(function string, args []ref.Val) (uint64, bool) {
	// A switch, not a map lookup: this runs for every call the overload trackers leave.
	switch function {
	case overloads.TypeConvertInt, overloads.TypeConvertUint, overloads.TypeConvertDouble,
		overloads.TypeConvertBool, overloads.TypeConvertDuration, overloads.TypeConvertTimestamp:
		if len(args) == 1 {
			if s, ok := args[0].(types.String); ok {
				return 1 + traversal(uint64(len(s))), true
			}
		}
	case overloads.Size:
		if len(args) == 1 {
			if s, ok := args[0].(types.String); ok {
				return runeCountCost(uint64(len(s))), true
			}
		}
	case overloads.TimeGetFullYear, overloads.TimeGetMonth, overloads.TimeGetDayOfYear,
		overloads.TimeGetDayOfMonth, overloads.TimeGetDate, overloads.TimeGetDayOfWeek,
		overloads.TimeGetHours, overloads.TimeGetMinutes, overloads.TimeGetSeconds, overloads.TimeGetMilliseconds:
		if len(args) == 2 {
			if s, ok := args[1].(types.String); ok {
				return tzCost(string(s), uint64(len(s))), true
			}
		}
	case operators.In:
		if len(args) != 2 {
			break
		}
		if _, isMap := args[1].(traits.Mapper); isMap {
			switch k := args[0].(type) {
			case types.String:
				return keyCost(uint64(len(k))), true
			case types.Bytes:
				return keyCost(uint64(len(k))), true
			}
		}
	case operators.Equals, operators.NotEquals, operators.Less, operators.LessEquals,
		operators.Greater, operators.GreaterEquals, overloads.Contains:
		return stringPairCost(function, args)
	case operators.Add:
		return concatListCost(args)
	case "isSorted", "sum", "max", "min", "indexOf", "lastIndexOf", "includes":
		if len(args) >= 1 {
			if l, ok := args[0].(traits.Lister); ok {
				return listTraversalCost(l), true
			}
		}
	}
	return 0, false
}

// listTraversalCost is the charge of one of the lists library's traversals (isSorted, sum,
// max, min, indexOf, lastIndexOf, includes) of a flat list — a nested one is deep.go's
// (searchCharge): per element one comparison plus a tenth of a unit a character of a string
// or bytes, rounded up, as listTraversalEstimate and stringListTraversal estimate it. The
// library charges a tenth of a unit a character rounded down and nothing for the comparison,
// so each string shorter than ten bytes was compared for free: 512 empty strings searched 185
// times ran at ~8 µs a unit charged, 37× the calibration, and 20 admitted policies of such
// searches spent 0.6–0.7 s per interface at 40% of the budget (issue #15, tester atk11).
func listTraversalCost(l traits.Lister) uint64 {
	cost := uint64(0)
	for it := l.Iterator(); it.HasNext() == types.True; {
		switch v := it.Next().(type) {
		case types.String:
			cost = addSaturating(cost, 1+traversal(uint64(len(v))))
		case types.Bytes:
			cost = addSaturating(cost, 1+traversal(uint64(len(v))))
		default:
			cost = addSaturating(cost, 1)
		}
	}
	return cost
}

// stringPairCost is cel-go's charge of comparing two strings or of a.contains(b) — a tenth
// of the shorter's size, rounded up; for contains the product of a tenth of each
// (interpreter/runtimecost.go, which its checker estimates alike) — with the sizes in bytes,
// read in constant time. cel-go sizes each operand by its Size(), which counts the runes of
// the whole string: `variables.a != 'z'` on a 262,000-byte annotation scanned both operands
// (~0.25 ms) for 1 unit, and `a.contains("")` for 0, so that 14,283 of them were admitted and
// ran for ~3 s (issue #15, class: run-time work not bounded by the charge — here the
// tracker's own). Strings compare by bytes, so their byte sizes bound the work; the estimate
// sizes strings in bytes too. False for other operands (cel-go's charge stands).
func stringPairCost(function string, args []ref.Val) (uint64, bool) {
	if len(args) != 2 {
		return 0, false
	}
	a, okA := args[0].(types.String)
	b, okB := args[1].(types.String)
	if !okA || !okB {
		return 0, false
	}
	if function == overloads.Contains {
		return saturatingMul(traversal(uint64(len(a))), traversal(uint64(len(b)))), true
	}
	return traversal(min(uint64(len(a)), uint64(len(b)))), true
}

// linearCallEstimate is the static counterpart of linearCost for overloadID; nil when the
// overload is not one of them. An argument the checker cannot size is assumed as long as
// the declared bounds allow (stringBound).
func (e estimator) linearCallEstimate(overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if function, ok := mapIndexes[overloadID]; ok {
		return e.indexEstimate(function, overloadID, args)
	}
	if !linearCostOverloads[overloadID] {
		return nil
	}
	all := args
	if target != nil {
		all = append([]checker.AstNode{*target}, args...)
	}
	if len(all) == 0 {
		return nil
	}
	n := e.argBound(all[0])
	cost := 1 + traversal(n)
	switch overloadID {
	case overloads.SizeString, overloads.SizeStringInst:
		cost = runeCountCost(n)
	case overloads.InMap:
		if k := all[0].Type().Kind(); k != types.StringKind && k != types.BytesKind && k != types.DynKind && k != types.AnyKind {
			return nil // a fixed-size key: the library's charge stands
		}
		cost = keyCost(n)
	default:
		if strings.HasPrefix(overloadID, "timestamp_to_") && len(all) == 2 {
			tz, literal := literalString(all[1].Expr())
			if !literal {
				tz = "" // unknown: the name of a zone, the dearer
			}
			cost = tzCost(tz, e.argBound(all[1]))
		}
	}
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 1, Max: cost},
		ResultSize: &checker.SizeEstimate{Min: 1, Max: 1}}
}

// Looking a key up in an input map (labels, annotations) hashes the whole key, charged one
// qualifier as an index (`vm.labels[k]`, `vm.labels[?k]`): a 262,000-character key took
// ~7 µs a lookup for a unit or two. Their keys are qualified names, at most
// defaultKeySize characters: a longer key is answered absent after comparing lengths, one
// per entry, instead of hashed (exactly: a map holding a longer key is looked up as before).

// absent reports that key is a string longer than every key of m.
func (m orderedMap) absent(key ref.Val) bool {
	s, ok := key.(types.String)
	if !ok || len(s) <= defaultKeySize {
		return false
	}
	for k := range m.keys {
		if len(k) >= len(s) {
			return false
		}
	}
	return true
}

// Find implements traits.Mapper (index and optional index).
func (m orderedMap) Find(key ref.Val) (ref.Val, bool) {
	if m.absent(key) {
		return nil, false
	}
	return m.Mapper.Find(key)
}

// Contains implements traits.Container (`in`).
func (m orderedMap) Contains(key ref.Val) ref.Val {
	if m.absent(key) {
		return types.False
	}
	return m.Mapper.Contains(key)
}

// Get implements traits.Indexer; the error names the key truncated.
func (m orderedMap) Get(key ref.Val) ref.Val {
	if m.absent(key) {
		return types.NewErr("no such key: %s", truncate(string(key.(types.String))))
	}
	return m.Mapper.Get(key)
}

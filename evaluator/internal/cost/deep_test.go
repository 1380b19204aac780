package cost

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// sharedDoubling is a list nesting one inner list twice at each of k levels: 2^k leaves in
// k+1 allocations, as .map(x, [x, x]) builds it.
func sharedDoubling(k int) ref.Val {
	x := types.DefaultTypeAdapter.NativeToValue([]ref.Val{types.Int(1), types.Int(2)})
	for range k {
		x = types.NewRefValList(types.DefaultTypeAdapter, []ref.Val{x, x})
	}
	return x
}

// deepSize stops counting past its limit.
func TestDeepSizeStopsPastTheLimit(t *testing.T) {
	if n := deepSize(sharedDoubling(40), 1000); n != 1001 {
		t.Errorf("deepSize = %d, want 1001 (the limit + 1)", n)
	}
	if n := deepSize(sharedDoubling(2), 1000); n != 15 {
		t.Errorf("deepSize = %d, want 15", n)
	}
}

// A pairwise call whose charge exceeds the per-call limit is refused before it runs, though
// each argument is within the limit: run, it would do the comparisons and only then be
// stopped (sets.intersects below: 40 × 201 node comparisons for a limit of 1,000).
func TestPairwiseCallBeyondTheLimitDoesNotRun(t *testing.T) {
	rows := func(n, width int, last int64) ref.Val {
		var l []ref.Val
		for i := range n {
			row := make([]ref.Val, width)
			for j := range row {
				row[j] = types.Int(j)
			}
			row[width-1] = types.Int(last + int64(i))
			l = append(l, types.DefaultTypeAdapter.NativeToValue(row))
		}
		return types.DefaultTypeAdapter.NativeToValue(l)
	}
	a, b := rows(40, 4, 0), rows(40, 4, 1000) // deep size 201 each
	i := slices.IndexFunc(deepCalls, func(d deepCall) bool { return d.function == "sets.intersects" })
	if i < 0 {
		t.Fatal("sets.intersects is not a deep call")
	}
	if err := deepCallError(deepCalls[i], []ref.Val{a, b}, 1000); err == nil {
		t.Error("sets.intersects of 40 × 40 nested lists (charge 8,442) ran under a limit of 1,000")
	}
	if err := deepCallError(deepCalls[i], []ref.Val{a, b}, 10_000); err != nil {
		t.Errorf("sets.intersects refused under a limit of 10,000: %v", err)
	}
}

// The run-time deep walk sees through wrappers: an optional counts one node plus what it
// holds, a list or map holding an optional nests, and the characters `==` and `in` compare
// are those of the values the optionals wrap (types.Optional.Equal compares them in full).
// Before, an optional counted one scalar node whatever it held: `optional.of(m) in
// [optional.of(m)]` was charged 5 units and ran for seconds (issue #15). Class: a wrapper
// value the deep walk does not see through.
func TestDeepWalkSeesThroughWrappers(t *testing.T) {
	const limit = 1 << 30
	leaves := make([]ref.Val, 2100)
	for i := range leaves {
		leaves[i] = types.Int(i)
	}
	flat := types.DefaultTypeAdapter.NativeToValue(leaves)
	opt := func(v ref.Val) ref.Val { return types.OptionalOf(v) }
	list := func(vs ...ref.Val) ref.Val { return types.DefaultTypeAdapter.NativeToValue(vs) }
	deep := sharedDoubling(10) // 2^10 leaves: 2,047 + 2^10 nodes
	long := types.String(strings.Repeat("s", 1<<20))

	if got, want := deepSize(opt(deep), limit), 1+deepSize(deep, limit); got != want {
		t.Errorf("deepSize(optional.of(doubling)) = %d, want %d", got, want)
	}
	if got, want := deepSize(opt(opt(flat)), limit), uint64(2+1+2100); got != want {
		t.Errorf("deepSize(optional.of(optional.of(flat))) = %d, want %d", got, want)
	}
	if got := deepSize(types.OptionalNone, limit); got != 1 {
		t.Errorf("deepSize(optional.none()) = %d, want 1", got)
	}
	for _, v := range []ref.Val{opt(deep), opt(opt(deep)), list(opt(flat)), list(opt(opt(flat))),
		types.NewStringInterfaceMap(types.DefaultTypeAdapter, map[string]any{"a": opt(flat)})} {
		if !nested(v) {
			t.Errorf("nested(%v) = false, want true: it holds a wrapper of a value", v.Type())
		}
	}
	// Optionals of scalars are leaves: a list of them is flat, charged by its elements and
	// the characters of their strings.
	for _, v := range []ref.Val{opt(types.Int(1)), opt(types.String("x")), types.OptionalNone, opt(flat), flat,
		list(opt(types.Int(1)), types.OptionalNone)} {
		if nested(v) {
			t.Errorf("nested(%v) = true, want false", v)
		}
	}

	// The charges: at least the deep size walked, or the elements compared.
	for _, tc := range []struct {
		name    string
		charge  *uint64
		atLeast uint64
	}{
		{"== on optionals of a nested list", equalCharge([]ref.Val{opt(deep), opt(deep)}, limit), 2 * deepSize(deep, limit)},
		// A search walks at most the list: each comparison stops at the element's end.
		{"in a list of optionals", inListCharge([]ref.Val{opt(deep), list(opt(deep))}, limit), deepSize(list(opt(deep)), limit)},
		{"in a list of optionals of flat lists", inListCharge([]ref.Val{opt(flat), list(opt(flat))}, limit), 2100},
		{"includes", linearCharge([]ref.Val{list(opt(deep)), opt(deep)}, limit), 2 * deepSize(deep, limit)},
		{"sets.contains", setsCharge(1)([]ref.Val{list(opt(deep)), list(opt(deep))}, limit), 2 * deepSize(deep, limit)},
		{"distinct", distinctCharge([]ref.Val{list(opt(deep), opt(deep))}, limit), 2 * deepSize(deep, limit)},
	} {
		if tc.charge == nil || *tc.charge < tc.atLeast {
			got := "nil (cel-go's charge, 1)"
			if tc.charge != nil {
				got = fmt.Sprint(*tc.charge)
			}
			t.Errorf("%s: charged %s, want at least %d", tc.name, got, tc.atLeast)
		}
	}

	// The guards: an optional of a value beyond the limit is refused before the call runs.
	small := uint64(1000)
	if err := deepArgsError("in", []ref.Val{opt(deep), list(opt(deep))}, small); err == nil {
		t.Error("deepArgsError let optional.of(doubling) in [optional.of(doubling)] through")
	}
	if err := charsError("_==_", equalChars(list(opt(long)), list(opt(long)))); err != nil {
		t.Errorf("charsError refused comparing two strings of 1 Mi characters behind optionals: %v", err)
	}
	if got := equalChars(list(opt(long)), list(opt(long))); got != 1<<20 {
		t.Errorf("equalChars(optionals of 1 Mi-character strings) = %d, want %d", got, 1<<20)
	}
	if got := searchChars(list(opt(long), opt(long)), opt(long)); got != 2<<20 {
		t.Errorf("searchChars(two optionals of 1 Mi-character strings) = %d, want %d", got, 2<<20)
	}
}

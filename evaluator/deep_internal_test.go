package evaluator

import (
	"slices"
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

// sizeWithin's walk is bounded by a visit count, not by what the value's top level
// suggests: a variable holding a shared 2^22-leaf list within every per-level bound is
// refused, not walked (before, all 8 million nodes were visited and it passed).
func TestSizeWithinBoundsItsWalk(t *testing.T) {
	if err := sizeWithin(sharedDoubling(22), 1024, 317); err == nil {
		t.Error("sizeWithin accepted a 2^22-leaf value")
	} else {
		t.Log(err)
	}
	if err := sizeWithin(sharedDoubling(4), 1024, 317); err != nil {
		t.Errorf("sizeWithin refused a 32-leaf value: %v", err)
	}
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

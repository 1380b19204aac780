package evaluator

import (
	"strings"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// replace() builds its result before any cost is charged: the guard refuses a result past
// what one call may produce before it is built (the static estimate, which now includes the
// result, admits no such call; the guard holds for whatever the estimate cannot see).
func TestReplaceResultIsBoundedBeforeItIsBuilt(t *testing.T) {
	x := types.String(strings.Repeat("a", 1020))
	cases := []struct {
		name   string
		args   []ref.Val
		refuse bool
	}{
		{"every match replaced by the receiver", []ref.Val{x, types.String("a"), x}, true},
		{"an empty old: one match per character and one more", []ref.Val{x, types.String(""), x}, true},
		{"the limit bounds the matches", []ref.Val{x, types.String("a"), x, types.Int(10)}, false},
		{"no match", []ref.Val{x, types.String("b"), x}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := replaceResultArg(tc.args, 1_000_000)
			if (err != nil) != tc.refuse {
				t.Errorf("replaceResultArg = %v, want refused = %v", err, tc.refuse)
			}
		})
	}
}

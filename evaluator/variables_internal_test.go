package evaluator

import (
	"context"
	"testing"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apiserver/pkg/cel/lazy"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// `variables` behaves as k8s.io/apiserver's lazy.MapValue, which it replaces: the same
// values, errors, escaping of field names, size, iteration and type, for every kind of key.
func TestVariablesBehaveAsLazyMapValue(t *testing.T) {
	p := compileSpec(t, "p", v1alpha1.ClusterIPAMPolicySpec{
		Variables: []v1alpha1.NamedExpression{
			{Name: "a", Expression: "1"},
			{Name: "x_y", Expression: "'plain'"},
			{Name: "x__underscores__y", Expression: "'escaped'"},
			{Name: "a__dot__b", Expression: "'dotted'"},
			{Name: "broken", Expression: "int(vm.name)"},
		},
		Allocation: &v1alpha1.Expression{Expression: "'Auto'"},
	})
	in := &Input{VM: VM{Name: "vm-a"}}
	newRun := func() *run {
		return &run{ctx: context.Background(), in: in, enforced: account{budget: DefaultLimits.InterfaceCostBudget}, trial: account{budget: DefaultLimits.TrialCostBudget}, at: &site{}}
	}
	ours := &newRun().activation(p).vars
	theirs := lazy.NewMapValue(p.variablesType.CelType())
	r := newRun()
	a := r.activation(p)
	for _, v := range p.variables {
		theirs.Append(v.name, func(*lazy.MapValue) ref.Val {
			val, err := r.eval(p, v.program, a)
			if err != nil {
				return types.WrapErr(err)
			}
			return val
		})
	}
	same := func(what string, got, want ref.Val) {
		t.Helper()
		switch {
		case got == nil || want == nil:
			if got != want {
				t.Errorf("%s = %v, want %v", what, got, want)
			}
		case types.IsError(want):
			if !types.IsError(got) || got.(*types.Err).Error() != want.(*types.Err).Error() {
				t.Errorf("%s = %v, want the error %v", what, got, want)
			}
		case got.Equal(want) != types.True:
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	for _, key := range []ref.Val{types.String("a"), types.String("x_y"), types.String("x__underscores__y"),
		types.String("a__dot__b"), types.String("broken"), types.String("missing"), types.String("__bad"), types.Int(1)} {
		gotV, gotFound := ours.Find(key)
		wantV, wantFound := theirs.Find(key)
		if gotFound != wantFound {
			t.Errorf("Find(%v) found = %v, want %v", key, gotFound, wantFound)
		}
		same("Find("+key.Type().TypeName()+" "+types.Format(key)+")", gotV, wantV)
		same("Get("+types.Format(key)+")", ours.Get(key), theirs.Get(key))
		same("Contains("+types.Format(key)+")", ours.Contains(key), theirs.Contains(key))
	}
	same("Size()", ours.Size(), theirs.Size())
	it, want := ours.Iterator(), theirs.Iterator()
	for i := 0; want.HasNext() == types.True; i++ {
		if it.HasNext() != types.True {
			t.Fatalf("iteration ends after %d values, want more", i)
		}
		same("value "+string(rune('0'+i)), it.Next(), want.Next())
	}
	if it.HasNext() != types.False {
		t.Error("iteration goes on past lazy.MapValue's")
	}
	if ours.Type().TypeName() != theirs.Type().TypeName() || ours.ConvertToType(types.TypeType).(ref.Type).TypeName() != theirs.Type().TypeName() {
		t.Errorf("type %s, want %s", ours.Type().TypeName(), theirs.Type().TypeName())
	}
	if ours.Equal(ours) != types.True || !types.IsError(ours.Equal(types.Int(1))) {
		t.Error("variables must equal itself only")
	}
	var _ traits.Mapper = ours
}

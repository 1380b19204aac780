package evaluator

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"strings"
	"testing"
)

// Each library call's estimate bounds what it is charged at run time on an input at the
// declared bounds, evaluated alone: the per-call limit is checked against the estimate, so a
// call charged more than estimated lets an admitted expression exceed the limit at run time.
// Kubernetes' library estimates join() at one traversal of its result and charges it two
// (FuzzGeneratedPolicy: holders.vms.join(”).lowerAscii().trim().split(”) was estimated at
// 97,157 and charged 103,647). Class: an estimate formula that differs from the run-time
// charge of the same call.
func TestLibraryEstimatesBoundTheirCharges(t *testing.T) {
	env := newExpressionsEnv(t)
	in := Input{}
	for i := range 256 {
		in.Holders.VMs = append(in.Holders.VMs, fmt.Sprintf("%s-%03d", strings.Repeat("h", 249), i))
	}
	in.VM.Name = strings.Repeat("n", 253)
	in.VM.Labels = map[string]string{}
	for i := range 256 {
		in.VM.Labels[fmt.Sprintf("%s-%03d", strings.Repeat("k", 59), i)] = strings.Repeat("v", 63)
	}
	act := map[string]any{"vm": &in.VM, "holders": &in.Holders, "interface": &in.Interface}
	for _, src := range []string{
		"holders.vms.join('')",
		"holders.vms.join(', ')",
		"holders.vms.join('').lowerAscii().trim().split('')",
		"holders.vms.map(x, x.upperAscii()).join('-')",
		"vm.labels.map(k, k + '=' + vm.labels[k]).join(', ')",
		"vm.name.split('').join('')",
		"[vm.name, vm.name].join('/')",
		"holders.vms.join('').replace('h', 'hh')",
		"holders.vms.indexOf(vm.name)",
		"holders.vms.includes(vm.name)",
		"holders.vms.isSorted()",
		"holders.vms.join('').substring(1)",
	} {
		checked, iss := env.Compile(src)
		if iss.Err() != nil {
			t.Fatalf("%s: %v", src, iss.Err())
		}
		est, err := env.EstimateCost(checked, estimatorOf(checked.NativeRep(), nil))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		prg, err := env.Program(checked, cel.CostLimit(1<<40)) // charges, not the limit, are compared
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		_, det, err := prg.Eval(act)
		if err != nil {
			t.Errorf("%s: %v (estimated %d)", src, err, est.Max)
			continue
		}
		if actual := *det.ActualCost(); actual > est.Max {
			t.Errorf("%s: charged %d, estimated at most %d", src, actual, est.Max)
		}
	}
}

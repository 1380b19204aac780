package evaluator

import "testing"

// The hot path of a decision allocates only what the evaluation needs: checking an input
// within its bounds allocates nothing (it built a path string for every field and map entry,
// and read the struct tags, on every decision).
func TestCheckingAnInputWithinItsBoundsAllocatesNothing(t *testing.T) {
	in := Input{
		VM: VM{Name: "vm-a", Labels: map[string]string{"app": "web", "tier": "1"},
			Annotations: map[string]string{"note": "x"}},
		Holders: Holders{VMs: []string{"vm-b", "vm-c"}},
	}
	in.normalize()
	if err := in.checkBounds(); err != nil {
		t.Fatalf("checkBounds = %v, want nil", err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = in.checkBounds() }); n != 0 {
		t.Errorf("checkBounds allocates %.0f times per call, want 0", n)
	}
}

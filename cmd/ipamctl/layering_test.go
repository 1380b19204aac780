package main

import (
	"os/exec"
	"strings"
	"testing"
)

// forbidden are the packages ipamctl must not link, by import path (a path forbids its
// subpackages too): the controller's manager, cache and reconcile machinery, and vmipam's
// controller wiring, reconcilers, cache transforms, string interning and the dry-run API
// server. ipamctl prints from the API types (controller/dryrun/v1alpha1, policies/v1alpha1)
// and evaluates offline with the dry-run engine over pure packages: controller/plan, the
// evaluator, policies/consumer, an in-memory reader (controller/overlay).
var forbidden = []string{
	"sigs.k8s.io/controller-runtime/pkg/manager",
	"sigs.k8s.io/controller-runtime/pkg/cache",
	"sigs.k8s.io/controller-runtime/pkg/builder",
	"sigs.k8s.io/controller-runtime/pkg/controller",
	"sigs.k8s.io/controller-runtime/pkg/source",
	"github.com/vmipam/vmipam/controller/dryrun/apiserver",
	"github.com/vmipam/vmipam/controller/index/cacheindex",
	"github.com/vmipam/vmipam/controller/metrics",
	"github.com/vmipam/vmipam/controller/policy",
	"github.com/vmipam/vmipam/controller/reads",
	"github.com/vmipam/vmipam/controller/shard",
	"github.com/vmipam/vmipam/controller/vm",
	"github.com/vmipam/vmipam/controller/webhook",
	"github.com/vmipam/vmipam/internal/intern",
}

// allowed are subpackages of forbidden paths that ipamctl may link: cacheapi holds only the
// informer option types that controller-runtime's client itself imports (no cache).
var allowed = map[string]bool{
	"sigs.k8s.io/controller-runtime/pkg/cache/cacheapi": true,
}

// controllerRoot is the controller's wiring package, forbidden itself but not its subpackages.
const controllerRoot = "github.com/vmipam/vmipam/controller"

func TestIpamctlLinksNoManagerCacheOrReconciler(t *testing.T) {
	for _, dep := range goListDeps(t, ".") {
		if dep == controllerRoot {
			t.Errorf("ipamctl links %s, the controller's wiring", dep)
		}
		for _, f := range forbidden {
			if (dep == f || strings.HasPrefix(dep, f+"/")) && !allowed[dep] {
				t.Errorf("ipamctl links %s (forbidden: %s)", dep, f)
			}
		}
	}
}

// goListDeps is `go list -deps` of the packages: every package they link, themselves included.
func goListDeps(t *testing.T, pkgs ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps"}, pkgs...)...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps %s: %v\n%s", strings.Join(pkgs, " "), err, stderr)
	}
	return strings.Fields(string(out))
}

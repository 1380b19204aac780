package compat

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/controller"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/samples"
	"github.com/vmipam/vmipam/test/crds"
	"github.com/vmipam/vmipam/test/env"
	"github.com/vmipam/vmipam/test/sandbox"
	"github.com/vmipam/vmipam/test/sim"
	"github.com/vmipam/vmipam/test/sim/sdn"
	"github.com/vmipam/vmipam/test/sim/virtualization"
)

// upstreamDir is ../shared/upstream relative to the repository root.
func upstreamDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "upstream")
}

// realCRDs returns ours, the trimmed SDN CRDs and the real virtualization CRDs.
func realCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	dir := upstreamDir()
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("real VirtualMachine CRD not found in %s (expected beside the checkout): %v", dir, err)
	}
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, c := range all {
		if c.Spec.Group != vmv1.GroupVersion.Group {
			out = append(out, c)
		}
	}
	for _, f := range []string{"virtualmachines.virtualization.deckhouse.io.yaml", "virtualmachineoperations.virtualization.deckhouse.io.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, crd)
	}
	return out
}

// TestSamplesWithRealCRD runs the samples against the real VirtualMachine CRD: the same
// outcome as with the trimmed CRD, other writers' status kept, and a live switch applied
// with a JSON patch (the real CRD has fields our Go types do not know, so nothing may
// round-trip the VM through them).
func TestSamplesWithRealCRD(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	e, err := env.Start(env.Options{CRDs: realCRDs(t), ControllerManager: true})
	t.Cleanup(func() {
		if e != nil {
			_ = e.Stop()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startAll(ctx, t, e)
	if err := sandbox.Apply(ctx, c, samples.FS, "*.yaml"); err != nil {
		t.Fatal(err)
	}
	want := map[string]*regexp.Regexp{
		"web ClusterNetwork/corp":       regexp.MustCompile(`^Auto web-cn-corp-[a-z2-7]{6} 10\.10\.0\.\d+ $`),
		"db ClusterNetwork/corp":        regexp.MustCompile(`^Static db-ip 10\.10\.0\.100 $`),
		"backup ClusterNetwork/storage": regexp.MustCompile(`^None \(L2\)   $`),
		"broken ClusterNetwork/corp":    regexp.MustCompile(`^-   IPAddressNotFound$`),
	}
	waitRows(ctx, t, c, want)

	vm := &vmv1.VirtualMachine{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: sandbox.Namespace, Name: "web"}, vm); err != nil {
		t.Fatal(err)
	}
	if vm.Status.Phase != vmv1.PhaseRunning || vm.Status.Networks[1].MACAddress == "" {
		t.Errorf("other writers' status lost: phase %q networks %+v", vm.Status.Phase, vm.Status.Networks)
	}

	patch := []byte(`[{"op":"add","path":"/spec/networks/1/ipAddressName","value":"db-ip"}]`)
	if err := c.Patch(ctx, vm, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		t.Fatalf("JSON patch of the VM: %v", err)
	}
	waitRows(ctx, t, c, map[string]*regexp.Regexp{
		"web ClusterNetwork/corp": regexp.MustCompile(`^- +IPAddressInUse$`),
	})
}

func startAll(ctx context.Context, t *testing.T, e *env.Environment) client.Client {
	scheme, err := controller.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{Scheme: scheme, Cache: sim.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := controller.Setup(ctx, mgr, evaluator.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	if err := sdn.New(nil).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := virtualization.New(nil).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	c, err := client.New(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitRows waits until each "<vm> <network>" row's "mode ipaddress address skipped" matches.
func waitRows(ctx context.Context, t *testing.T, c client.Reader, want map[string]*regexp.Regexp) {
	t.Helper()
	var last []string
	for ctx.Err() == nil {
		rows, _, _, err := sandbox.Snapshot(ctx, c, sandbox.Namespace)
		ok := err == nil
		last = last[:0]
		got := map[string]string{}
		for _, r := range rows {
			got[r.VM+" "+r.Network] = strings.Join([]string{r.Mode, r.IPAddress, r.Address, r.Skipped}, " ")
			last = append(last, r.VM+" "+r.Network+": "+got[r.VM+" "+r.Network])
		}
		for k, re := range want {
			ok = ok && re.MatchString(got[k])
		}
		if ok {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("rows never matched %v; last:\n%s", want, strings.Join(last, "\n"))
}

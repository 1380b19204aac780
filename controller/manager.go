package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/vmipam/vmipam/controller/backlog"
	"github.com/vmipam/vmipam/controller/dryrun"
	"github.com/vmipam/vmipam/controller/dryrun/apiserver"
	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/index/cacheindex"
	"github.com/vmipam/vmipam/controller/metrics"
	"github.com/vmipam/vmipam/controller/plan"
	"github.com/vmipam/vmipam/controller/policy"
	"github.com/vmipam/vmipam/controller/scheme"
	"github.com/vmipam/vmipam/controller/vm"
	"github.com/vmipam/vmipam/evaluator"
)

// Name is the controller's name in events and logs.
const Name = "vmipam-controller"

// NewScheme returns a scheme with every kind vmipam reads or writes: core, ours, SDN and
// virtualization. It is scheme.New, which ipamctl uses without linking this package.
func NewScheme() (*runtime.Scheme, error) { return scheme.New() }

// Setup registers vmipam's indexes and reconcilers with mgr, the policy watcher that keeps
// the registry current on every replica, and the start-up step that installs the default
// policies when absent. It returns the policy registry, whose snapshot the dry-run API reads
// too.
func Setup(ctx context.Context, mgr manager.Manager, limits evaluator.Limits) (*policy.Registry, error) {
	compiler, err := evaluator.NewCompiler(limits)
	if err != nil {
		return nil, err
	}
	registry, err := policy.NewRegistry(compiler)
	if err != nil {
		return nil, err
	}
	if err := index.Setup(ctx, cacheindex.Indexer{Cache: mgr.GetCache()}); err != nil {
		return nil, err
	}
	if err := vm.WatchRecordObservation(ctx, mgr.GetCache()); err != nil {
		return nil, err
	}
	if err := mgr.Add(policy.DefaultsRunnable(mgr.GetClient())); err != nil {
		return nil, err
	}
	if err := (&policy.Watcher{Client: mgr.GetClient(), Registry: registry}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("policy watcher: %w", err)
	}
	findings := policy.NewFindings()
	if err := (&policy.Reconciler{Client: mgr.GetClient(), Registry: registry, Findings: findings}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("policy reconciler: %w", err)
	}
	sdn, err := watchSDN(ctx, mgr)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(sdn); err != nil {
		return nil, err
	}
	vmr := &vm.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Policies: registry,
		Recorder: mgr.GetEventRecorder(Name), PolicyChanges: registry.Changes(), PoliciesLoaded: registry.Loaded(), Findings: findings,
		SDNLastAnswer: sdn.LastAnswer, SDNStalls: sdn.Stalls(), SDNStalled: sdn.Stalled}
	if err := vmr.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("virtualmachine reconciler: %w", err)
	}
	return registry, nil
}

// watchSDN returns a backlog.Tracker of SDN's answers on the IPAddresses of mgr's cache; its
// stall notice comes plan.UnansweredGrace after SDN's last answer.
func watchSDN(ctx context.Context, mgr manager.Manager) (*backlog.Tracker, error) {
	t := backlog.New(plan.UnansweredGrace, nil)
	if err := t.Watch(ctx, mgr.GetCache()); err != nil {
		return nil, err
	}
	return t, nil
}

// The dry-run API server authenticates and authorizes its callers through the API server
// (delegation) and reads the front-proxy CA the API server publishes in kube-system.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",namespace=kube-system,resources=configmaps,resourceNames=extension-apiserver-authentication,verbs=get;list;watch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get

// SetupDryRun adds the dry-run API server (DESIGN.md §5) to mgr: it answers Evaluations from
// mgr's cache and registry's snapshot with registry's compiler, on every replica, writes
// nothing, and is a readiness check ("dryrun"). Its options must be valid (the serving
// certificate readable, the API server reachable for the front-proxy configuration).
func SetupDryRun(mgr manager.Manager, registry *policy.Registry, opts *apiserver.Options) (*apiserver.Server, error) {
	engine, err := dryrun.NewEngine(registry.Compiler(), mgr.GetScheme())
	if err != nil {
		return nil, fmt.Errorf("dry-run engine: %w", err)
	}
	engine.OnCompileError, engine.OnDecided = metrics.DryRun.CompileFailed, metrics.DryRun.Decided
	// The dry run judges a pending Auto IPAddress as the leader's reconciles do; its own
	// tracker (a second handler on the same informer) keeps the two setups independent.
	sdn, err := watchSDN(context.Background(), mgr)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(sdn); err != nil {
		return nil, err
	}
	engine.SDNLastAnswer = sdn.LastAnswer
	srv, err := apiserver.New(opts, engine, mgr.GetCache(), mgr.GetAPIReader(), registry)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(srv); err != nil {
		return nil, err
	}
	return srv, mgr.AddReadyzCheck("dryrun", srv.ReadyCheck)
}

package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/vmipam/vmipam/controller/dryrun"
	"github.com/vmipam/vmipam/controller/dryrun/apiserver"
	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/metrics"
	"github.com/vmipam/vmipam/controller/policy"
	"github.com/vmipam/vmipam/controller/scheme"
	"github.com/vmipam/vmipam/controller/vm"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
)

// Name is the controller's name in events and logs.
const Name = "vmipam-controller"

// NewScheme returns a scheme with every kind vmipam reads or writes: core, ours, SDN and
// virtualization. It is scheme.New, which ipamctl uses without linking this package.
func NewScheme() (*runtime.Scheme, error) { return scheme.New() }

// CacheOptions limits what the manager caches: only launcher pods (label
// vm.kubevirt.io/name), trimmed to metadata and status.phase (slimLauncherPod), and no
// managedFields on any object.
func CacheOptions() cache.Options {
	launcher, err := labels.NewRequirement(vmv1.LabelLauncherVMName, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant requirement; cannot fail
	}
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Label: labels.NewSelector().Add(*launcher), Transform: slimLauncherPod},
		},
	}
}

// slimLauncherPod is the cache transform of launcher pods: it keeps what vmipam and its
// watches read — the metadata (labels, the networks-spec annotation, owner references,
// deletion timestamp) and status.phase — and drops managedFields, the spec and the rest of the
// status. A real virt-launcher pod's spec and status (containers, volumes, environment,
// container statuses) are several kilobytes each, which 10,000 VMs would hold for nothing.
// vmipam only ever merge-patches pods, so the missing fields are never written back.
func slimLauncherPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok { // a tombstone of a deleted pod: nothing to trim
		return obj, nil
	}
	slim := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta}
	slim.ManagedFields = nil
	slim.Status.Phase = pod.Status.Phase
	return slim, nil
}

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
	if err := index.Setup(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	if err := mgr.Add(policy.DefaultsRunnable(mgr.GetClient())); err != nil {
		return nil, err
	}
	if err := (&policy.Watcher{Client: mgr.GetClient(), Registry: registry}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("policy watcher: %w", err)
	}
	if err := (&policy.Reconciler{Client: mgr.GetClient(), Registry: registry}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("policy reconciler: %w", err)
	}
	vmr := &vm.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Policies: registry,
		Recorder: mgr.GetEventRecorder(Name), PolicyChanges: registry.Changes(), PoliciesLoaded: registry.Loaded()}
	if err := vmr.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("virtualmachine reconciler: %w", err)
	}
	return registry, nil
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
	engine.OnCompileError = metrics.DryRun.CompileFailed
	srv, err := apiserver.New(opts, engine, mgr.GetCache(), mgr.GetAPIReader(), registry)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(srv); err != nil {
		return nil, err
	}
	return srv, mgr.AddReadyzCheck("dryrun", srv.ReadyCheck)
}

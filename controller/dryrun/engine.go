package dryrun

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/dryrun/convert"
	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	"github.com/vmipam/vmipam/controller/index"
	"github.com/vmipam/vmipam/controller/overlay"
	"github.com/vmipam/vmipam/controller/plan"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies"
)

// Engine decodes and evaluates dry-run requests. The API server and ipamctl share one, so the
// same request gets the same answer online and offline. It is safe for concurrent use.
type Engine struct {
	compiler *evaluator.Compiler
	builtin  *evaluator.Policy
	scheme   *runtime.Scheme
	schemas  schemas
	now      func() time.Time

	// OnCompileError, when set, is called once for every candidate policy that does not
	// compile (the API server counts them in a metric).
	OnCompileError func()
	// OnDecided, when set, is called by Evaluate with the evaluator's decision of every
	// interface the spec names, before it is converted to the API (the API server counts
	// them in metrics, as the reconciler does).
	OnDecided func(evaluator.Decision)
	// SDNLastAnswer, when set, tells when SDN was last seen answering an IPAddress on the
	// network of the one given (backlog.Tracker.LastAnswer), so that a pending Auto
	// IPAddress is judged as the controller judges it (plan.Options.SDNLastAnswer); nil
	// (ipamctl without a cluster's history): each unanswered one waits plan.UnansweredGrace.
	SDNLastAnswer func(*sdnv1.IPAddress) time.Time
}

// NewEngine returns an Engine that compiles candidate policies with compiler (use the
// controller's, so the limits are the same) and knows the kinds of scheme (controller.NewScheme).
func NewEngine(compiler *evaluator.Compiler, scheme *runtime.Scheme) (*Engine, error) {
	b, err := policies.Builtin()
	if err != nil {
		return nil, fmt.Errorf("loading the built-in policy: %w", err)
	}
	builtin, errs := compiler.Compile(b, b)
	if len(errs) > 0 {
		return nil, fmt.Errorf("built-in policy %s does not compile: %w", b.Name, errs.ToAggregate())
	}
	s, err := loadSchemas()
	if err != nil {
		return nil, err
	}
	return &Engine{compiler: compiler, builtin: builtin, scheme: scheme, schemas: s, now: time.Now}, nil
}

// Scheme is the scheme the Engine knows the kinds of (controller.NewScheme).
func (e *Engine) Scheme() *runtime.Scheme { return e.scheme }

// Compiler returns the compiler the Engine uses.
func (e *Engine) Compiler() *evaluator.Compiler { return e.compiler }

// Defaults returns the policy set of a fresh cluster: the shipped default policies as
// installed, then the built-in default. ipamctl decides with it when given no policies.
func (e *Engine) Defaults() (*evaluator.Set, error) {
	defaults, err := policies.Defaults()
	if err != nil {
		return nil, fmt.Errorf("loading the shipped default policies: %w", err)
	}
	compiled := make([]*evaluator.Policy, 0, len(defaults))
	for i := range defaults {
		p, errs := e.compiler.Compile(&defaults[i], &defaults[i])
		if len(errs) > 0 {
			return nil, fmt.Errorf("shipped policy %s does not compile: %w", defaults[i].Name, errs.ToAggregate())
		}
		compiled = append(compiled, p)
	}
	return evaluator.NewSet(compiled, e.builtin), nil
}

// Evaluate answers req: what one reconcile of req.VM would decide and do, reading the world
// from base with req.Objects laid over it (a nil base: only req.Objects exist) and deciding
// with req's candidate policies, when it has any, else with installed (nil: the shipped
// defaults, source Shipped). It writes nothing.
//
// The VM is merged with the VM of the same name in that world, if there is one, as applying
// the manifest would: the request's spec; the live UID, creation time and generation; the
// live labels and annotations (the networks-spec vmipam wrote, say) overridden by the
// request's; the live status unless the request carries one. A VM that does not exist gets a
// stand-in UID (derived from namespace and name) and the current time as creation time. Every
// object without a UID gets a stand-in too, and a VirtualMachine ownerReference without a UID
// refers to the VM of that name.
//
// The candidate policies of a Request from Decode are already compiled; those of a Request
// built otherwise are compiled here, and one that does not compile is an *InvalidError. Other
// errors are failures to read from base.
func (e *Engine) Evaluate(ctx context.Context, base client.Reader, installed *evaluator.Set, req *Request) (*dryrunv1.EvaluationStatus, error) {
	set, source, err := e.policySet(ctx, req, installed)
	if err != nil {
		return nil, err
	}
	reader, vm, exists, err := e.world(ctx, base, req)
	if err != nil {
		return nil, err
	}
	p, err := plan.Compute(ctx, reader, set, vm, plan.Options{Now: e.now(), Evaluator: evaluator.Options{Explain: true}, DryRun: true,
		SDNLastAnswer: e.SDNLastAnswer})
	if err != nil {
		return nil, fmt.Errorf("evaluating VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	if e.OnDecided != nil {
		for _, it := range p.Interfaces {
			if !it.Removed { // a removed interface is asked only hotplug: no decision to count
				e.OnDecided(it.Decision)
			}
		}
	}
	return convert.Status(vm, exists, dryrunv1.PolicySummary{Source: source, Order: set.Policies()}, p), nil
}

// policySet is req's compiled candidate policies, or installed (nil: Defaults). A request
// not built by Decode has its policies compiled here, within the same bounds.
func (e *Engine) policySet(ctx context.Context, req *Request, installed *evaluator.Set) (*evaluator.Set, string, error) {
	switch {
	case req.compiled != nil:
		return req.compiled, dryrunv1.PoliciesRequest, nil
	case req.Policies != nil:
		candidates := make([]candidate, len(req.Policies))
		for i := range req.Policies {
			candidates[i] = candidate{index: i, policy: &req.Policies[i]}
		}
		path := field.NewPath("policies")
		if err := candidateBounds(path, candidates); err != nil {
			return nil, dryrunv1.PoliciesRequest, invalid(field.ErrorList{err})
		}
		set, errs, err := e.compileCandidates(ctx, path, candidates)
		if err != nil {
			return nil, dryrunv1.PoliciesRequest, err
		}
		return set, dryrunv1.PoliciesRequest, invalid(errs)
	case installed != nil:
		return installed, dryrunv1.PoliciesInstalled, nil
	}
	set, err := e.Defaults()
	return set, dryrunv1.PoliciesShipped, err
}

// world builds the reader the evaluation observes and the VM as it would be after applying
// the request's manifest.
func (e *Engine) world(ctx context.Context, base client.Reader, req *Request) (*overlay.Reader, *vmv1.VirtualMachine, bool, error) {
	var scopedBase client.Reader
	if base != nil {
		scopedBase = scoped{base: base, scheme: e.scheme, namespace: req.VM.Namespace}
	}
	reader := overlay.New(scopedBase, e.scheme)
	if err := index.Setup(ctx, reader); err != nil {
		return nil, nil, false, err
	}
	objs := make([]client.Object, len(req.Objects))
	for i, o := range req.Objects {
		objs[i] = o.DeepCopyObject().(client.Object)
	}
	withUIDs(objs)
	if err := reader.Add(objs...); err != nil {
		return nil, nil, false, err
	}
	vm, exists, err := e.resolveVM(ctx, reader, req.VM)
	if err != nil {
		return nil, nil, false, err
	}
	uidOf := func(name string) types.UID { return e.vmUID(ctx, reader, vm, name) }
	for _, o := range objs {
		if resolveOwners(o, uidOf) {
			if err := reader.Add(o); err != nil {
				return nil, nil, false, err
			}
		}
	}
	return reader, vm, exists, reader.Add(vm)
}

// resolveVM merges the request's VM with the VM of that name the reader has, if any.
func (e *Engine) resolveVM(ctx context.Context, reader client.Reader, requested *vmv1.VirtualMachine) (*vmv1.VirtualMachine, bool, error) {
	vm := requested.DeepCopy()
	live := &vmv1.VirtualMachine{}
	err := reader.Get(ctx, client.ObjectKeyFromObject(vm), live)
	switch {
	case apierrors.IsNotFound(err):
		if vm.UID == "" {
			vm.UID = standInUID("VirtualMachine", vm.Namespace, vm.Name)
		}
		if vm.CreationTimestamp.IsZero() {
			vm.CreationTimestamp = metav1.NewTime(e.now()).Rfc3339Copy()
		}
		return vm, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("get VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	mergeLive(vm, live)
	return vm, true, nil
}

// mergeLive completes vm (the request's) with what applying it would keep of live.
func mergeLive(vm, live *vmv1.VirtualMachine) {
	if vm.UID == "" {
		vm.UID = live.UID
	}
	if vm.CreationTimestamp.IsZero() {
		vm.CreationTimestamp = live.CreationTimestamp
	}
	if vm.Generation == 0 {
		vm.Generation = live.Generation
	}
	if vm.ResourceVersion == "" {
		vm.ResourceVersion = live.ResourceVersion
	}
	vm.Labels = mergeMaps(live.Labels, vm.Labels)
	vm.Annotations = mergeMaps(live.Annotations, vm.Annotations)
	if statusEmpty(vm.Status) {
		vm.Status = *live.Status.DeepCopy()
	}
}

func mergeMaps(base, over map[string]string) map[string]string {
	if len(base) == 0 && len(over) == 0 {
		return over
	}
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

func statusEmpty(s vmv1.VirtualMachineStatus) bool {
	return s.Phase == "" && len(s.Networks) == 0 && len(s.Conditions) == 0 && s.ObservedGeneration == 0
}

// vmUID is the UID of the namespace's VM called name: the evaluated one, one the reader
// has, or the stand-in of a VM that does not exist.
func (e *Engine) vmUID(ctx context.Context, reader client.Reader, vm *vmv1.VirtualMachine, name string) types.UID {
	if name == vm.Name {
		return vm.UID
	}
	other := &vmv1.VirtualMachine{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: name}, other); err == nil && other.UID != "" {
		return other.UID
	}
	return standInUID("VirtualMachine", vm.Namespace, name)
}

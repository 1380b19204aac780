package apiserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/dryrun"
	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
	"github.com/vmipam/vmipam/controller/metrics"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	policyv1 "github.com/vmipam/vmipam/policies/v1alpha1"
)

// PolicySource is the controller's policy snapshot; policy.Registry implements it.
type PolicySource interface {
	// Set is the current snapshot of the installed policies.
	Set() *evaluator.Set
	// Loaded is closed once every installed policy has been compiled.
	Loaded() <-chan struct{}
}

// MaxObjects bounds spec.objects: an Evaluation overlays a VM's few networks, pools,
// addresses and pods, and every object costs decoding, validation and a place in the
// overlay. More is a 422 at spec.objects, before any of it is looked at.
const MaxObjects = 1000

// VerbEvaluate is the custom RBAC verb on clusteripampolicies that lets a caller have
// candidate policies (spec.policies) evaluated — without the power to create them.
const VerbEvaluate = "evaluate"

// authorizing is what Create asks of the delegated authorizer (a SubjectAccessReview per
// check, cached).
type authorizing interface {
	Authorize(ctx context.Context, a authorizer.Attributes) (authorizer.Decision, string, error)
}

// evaluations is the REST storage of the evaluations resource: create only, nothing stored.
type evaluations struct {
	engine     *dryrun.Engine
	reader     client.Reader
	policies   PolicySource
	authorizer authorizing
	timeout    time.Duration
	// spec checks the received spec against Evaluation's schema.
	spec *specSchema
	// crds are the cluster's CRD schemas, which find the unknown fields of the manifests.
	crds *clusterSchemas
}

var (
	_ rest.Storage              = (*evaluations)(nil)
	_ rest.Creater              = (*evaluations)(nil)
	_ rest.Scoper               = (*evaluations)(nil)
	_ rest.SingularNameProvider = (*evaluations)(nil)
)

// New returns an empty Evaluation, for the decoder.
func (r *evaluations) New() runtime.Object { return &dryrunv1.Evaluation{} }

// Destroy releases nothing: the storage holds no resources of its own.
func (r *evaluations) Destroy() {}

// NamespaceScoped is true: an Evaluation lives in its VM's namespace.
func (r *evaluations) NamespaceScoped() bool { return true }

// GetSingularName is "evaluation".
func (r *evaluations) GetSingularName() string { return "evaluation" }

// Create answers an Evaluation and counts the answer by status code. It runs in one of the
// fair queue's seats (fairQueue), which the request took before its body was read.
func (r *evaluations) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, opts *metav1.CreateOptions) (runtime.Object, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	mode := metav1.FieldValidationWarn // the API server's default when a client asks nothing
	if opts != nil && opts.FieldValidation != "" {
		mode = opts.FieldValidation
	}
	out, err := r.create(ctx, obj, createValidation, mode)
	if err != nil && pastDeadline(ctx, err) {
		err = apierrors.NewTimeoutError(fmt.Sprintf("the evaluation did not finish within %s: %v", r.timeout, err), 0)
	}
	metrics.Request(statusCode(err))
	return out, err
}

func (r *evaluations) create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, mode string) (*dryrunv1.Evaluation, error) {
	ev, ok := obj.(*dryrunv1.Evaluation)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not an Evaluation: %T", obj))
	}
	if err := r.admit(ctx, ev, createValidation, mode); err != nil {
		return nil, err
	}
	namespace, caller := genericapirequest.NamespaceValue(ctx), callerOf(ctx)
	body, err := r.body(ctx, ev, namespace, caller)
	if err != nil {
		return nil, err
	}
	if err := r.pruneManifests(ctx, ev, body, mode); err != nil {
		return nil, err
	}
	authorize := func(vmNamespace string, withPolicies bool) error {
		return r.authorize(ctx, ev, namespace, vmNamespace, caller, withPolicies)
	}
	req, err := r.engine.DecodeBody(ctx, body, dryrun.DecodeOptions{Root: field.NewPath("spec"), DefaultNamespace: namespace,
		Authorize: authorize})
	var inv *dryrun.InvalidError
	switch {
	case errors.As(err, &inv):
		return nil, invalid(ev, inv.Errs)
	case err != nil:
		return nil, err
	}
	base := &readGuard{Reader: r.reader, scheme: r.engine.Scheme(), evaluated: client.ObjectKeyFromObject(req.VM),
		allowed: func(ctx context.Context, a authorizer.AttributesRecord, why string) error {
			a.User = caller
			return r.allowed(ctx, a, why)
		}}
	if ev.Spec.VM == nil {
		base.evaluatedWhy = "naming a VM by spec.virtualMachineName requires it"
	}
	status, err := r.evaluate(ctx, base, req)
	if err != nil {
		return nil, err
	}
	if err := r.redactInstalled(ctx, caller, status); err != nil {
		return nil, err
	}
	ev.Status = *status
	ev.ManagedFields = nil // the handler's field manager added them; an Evaluation is never stored
	return ev, nil
}

// admit checks what an Evaluation must be before anything reads the cluster for it: its
// metadata as the API server checks a create's, the admission chain's validation, the counts
// of spec.objects and spec.policies (before their CRD lookups and pruning), the namespace, and
// the received spec against the served schema by mode (fieldValidation: Strict refuses
// unknown fields, Warn returns warnings).
func (r *evaluations) admit(ctx context.Context, ev *dryrunv1.Evaluation, createValidation rest.ValidateObjectFunc, mode string) error {
	namespace := genericapirequest.NamespaceValue(ctx)
	if errs := validateMeta(ev, namespace); len(errs) > 0 {
		return invalid(ev, errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, ev); err != nil {
			return err
		}
	}
	if n := len(ev.Spec.Objects); n > MaxObjects {
		return invalid(ev, field.ErrorList{field.TooMany(field.NewPath("spec", "objects"), n, MaxObjects)})
	}
	if n := len(ev.Spec.Policies); n > dryrun.MaxPolicies {
		return invalid(ev, field.ErrorList{field.TooMany(field.NewPath("spec", "policies"), n, dryrun.MaxPolicies)})
	}
	if err := r.namespaceExists(ctx, namespace); err != nil {
		return err
	}
	if data, problem := ev.Spec.Received(); data != nil {
		errs, warnings := r.spec.check(data, problem, mode)
		if len(errs) > 0 {
			return invalid(ev, errs)
		}
		warn(ctx, warnings)
	}
	return nil
}

// validateMeta checks the Evaluation's metadata as the API server checks a create's (name
// and generateName syntax, namespace, labels, annotations, owner references, finalizers),
// since the answer echoes it. A name is not required: nothing is stored under it, as for
// the API server's own review resources. The namespace is the request's when the object
// names none (the handler has checked that they agree when it does).
func validateMeta(ev *dryrunv1.Evaluation, namespace string) field.ErrorList {
	meta := ev.ObjectMeta
	meta.Namespace = cmp.Or(meta.Namespace, namespace)
	errs := apivalidation.ValidateObjectMeta(&meta, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if ev.Name == "" && ev.GenerateName == "" {
		errs = errs.Filter(func(err error) bool {
			var fe *field.Error
			return errors.As(err, &fe) && fe.Type == field.ErrorTypeRequired && fe.Field == "metadata.name"
		})
	}
	return errs
}

// body is the Engine's request for the Evaluation: its spec, with a VM named by
// spec.virtualMachineName read from the cache once the caller may get it.
func (r *evaluations) body(ctx context.Context, ev *dryrunv1.Evaluation, namespace string, caller user.Info) (*dryrun.Body, error) {
	spec, path := ev.Spec, field.NewPath("spec")
	body := &dryrun.Body{VM: rawOf(spec.VM), Objects: make([]json.RawMessage, len(spec.Objects))}
	for i := range spec.Objects {
		body.Objects[i] = rawOf(&spec.Objects[i])
	}
	if spec.Policies != nil {
		body.Policies = make([]json.RawMessage, len(spec.Policies))
		for i := range spec.Policies {
			body.Policies[i] = rawOf(&spec.Policies[i])
		}
	}
	switch {
	case spec.VM != nil && spec.VirtualMachineName != "":
		return nil, invalid(ev, field.ErrorList{field.Forbidden(path.Child("virtualMachineName"), "give either vm or virtualMachineName, not both")})
	case spec.VM == nil && spec.VirtualMachineName == "":
		return nil, invalid(ev, field.ErrorList{field.Required(path.Child("vm"), "a VirtualMachine manifest, or the name of an existing VM in virtualMachineName")})
	case spec.VM != nil:
		return body, nil
	}
	if err := r.allowed(ctx, getVM(caller, namespace, spec.VirtualMachineName), "naming a VM by spec.virtualMachineName requires it"); err != nil {
		return nil, err
	}
	vm := &vmv1.VirtualMachine{}
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: spec.VirtualMachineName}, vm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, invalid(ev, field.ErrorList{field.NotFound(path.Child("virtualMachineName"), spec.VirtualMachineName)})
		}
		return nil, fmt.Errorf("reading VirtualMachine %s/%s: %w", namespace, spec.VirtualMachineName, err)
	}
	vm.APIVersion, vm.Kind = vmv1.GroupVersion.String(), "VirtualMachine"
	raw, err := json.Marshal(vm)
	if err != nil {
		return nil, err
	}
	body.VM = raw
	return body, nil
}

// namespaceExists answers a 404 for an Evaluation in a namespace that does not exist, as the
// API server answers a namespaced create there (the caller was allowed to create
// evaluations in it, so its existence is theirs to know).
func (r *evaluations) namespaceExists(ctx context.Context, namespace string) error {
	err := r.reader.Get(ctx, client.ObjectKey{Name: namespace}, &corev1.Namespace{})
	if apierrors.IsNotFound(err) {
		return notFoundNamespace(namespace)
	}
	return err
}

// pruneManifests drops the fields of the manifests in body that their kinds' CRDs in the
// cluster do not declare, as the API server would when they are applied, and answers them by
// mode (the request's fieldValidation): a 422 naming each (spec.vm.spec.networks[0].bogus)
// under Strict, a warning under Warn, nothing under Ignore.
func (r *evaluations) pruneManifests(ctx context.Context, ev *dryrunv1.Evaluation, body *dryrun.Body, mode string) error {
	spec := field.NewPath("spec")
	var unknown []string
	prune := func(path *field.Path, raw *json.RawMessage, gvk schema.GroupVersionKind) error {
		if len(*raw) == 0 {
			return nil
		}
		pruned, found, err := r.crds.prune(ctx, path, *raw, gvk)
		*raw, unknown = pruned, append(unknown, found...)
		return err
	}
	if ev.Spec.VM != nil {
		if err := prune(spec.Child("vm"), &body.VM, vmv1.GroupVersion.WithKind("VirtualMachine")); err != nil {
			return err
		}
	}
	for i := range body.Policies {
		if err := prune(spec.Child("policies").Index(i), &body.Policies[i], policyv1.GroupVersion.WithKind("ClusterIPAMPolicy")); err != nil {
			return err
		}
	}
	for i := range body.Objects {
		// no default kind: an object without one, or of a kind not allowed in objects, is
		// DecodeBody's to refuse, and costs no CRD lookup here
		if err := prune(spec.Child("objects").Index(i), &body.Objects[i], schema.GroupVersionKind{}); err != nil {
			return err
		}
	}
	errs, warnings := byFieldValidation(unknown, "unknown field", mode)
	if len(errs) > 0 {
		return invalid(ev, errs)
	}
	warn(ctx, warnings)
	return nil
}

// getVM is the check that caller may get the VirtualMachine namespace/name.
func getVM(caller user.Info, namespace, name string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: caller, Verb: "get", Namespace: namespace, Name: name,
		APIGroup: vmv1.GroupVersion.Group, APIVersion: vmv1.GroupVersion.Version, Resource: "virtualmachines", ResourceRequest: true}
}

// authorize is the Engine's Authorize: the VM must be in the Evaluation's namespace (where
// the API server allowed the caller to create evaluations), and candidate policies need the
// verb evaluate on clusteripampolicies.
func (r *evaluations) authorize(ctx context.Context, ev *dryrunv1.Evaluation, namespace, vmNamespace string, caller user.Info, withPolicies bool) error {
	if vmNamespace != namespace {
		return invalid(ev, field.ErrorList{field.Invalid(field.NewPath("spec", "vm", "metadata", "namespace"), vmNamespace,
			fmt.Sprintf("must be the Evaluation's namespace %q", namespace))})
	}
	if !withPolicies {
		return nil
	}
	evaluate := authorizer.AttributesRecord{User: caller, Verb: VerbEvaluate, APIGroup: policyv1.GroupVersion.Group,
		APIVersion: policyv1.GroupVersion.Version, Resource: "clusteripampolicies", ResourceRequest: true}
	return r.allowed(ctx, evaluate, "candidate policies in spec.policies require it")
}

// allowed asks the API server whether a is allowed; a denial is a 403 naming why the check
// was made (why is a clause: "candidate policies in spec.policies require it").
func (r *evaluations) allowed(ctx context.Context, a authorizer.AttributesRecord, why string) error {
	decision, reason, err := r.authorizer.Authorize(ctx, a)
	switch {
	case decision == authorizer.DecisionAllow:
		return nil
	case err != nil:
		return apierrors.NewInternalError(fmt.Errorf("authorizing (%s): %w", why, err))
	}
	if reason == "" {
		reason = why
	} else {
		reason = why + ": " + reason
	}
	return responsewriters.ForbiddenStatusError(a, reason)
}

// evaluate decides with the candidate policies or, once they are loaded, the installed ones.
func (r *evaluations) evaluate(ctx context.Context, base client.Reader, req *dryrun.Request) (*dryrunv1.EvaluationStatus, error) {
	var installed *evaluator.Set
	if req.Policies == nil {
		select {
		case <-r.policies.Loaded():
			installed = r.policies.Set()
		case <-ctx.Done():
			return nil, apierrors.NewServiceUnavailable("the controller is still loading the installed policies; retry shortly")
		}
	}
	start := time.Now()
	status, err := r.engine.Evaluate(ctx, base, installed, req)
	var denied *apierrors.StatusError
	switch {
	case errors.As(err, &denied) && apierrors.IsForbidden(denied):
		return nil, denied // the guard's 403, wrapped by the Engine: the API server answers only an unwrapped status
	case err != nil:
		return nil, err // DecodeBody compiled the candidate policies: no *InvalidError here
	}
	metrics.DryRun.Evaluated(start) // the engine counted the decisions (Engine.OnDecided)
	return status, nil
}

// listPolicies is the check that caller may list the installed ClusterIPAMPolicies.
func listPolicies(caller user.Info) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: caller, Verb: "list", APIGroup: policyv1.GroupVersion.Group,
		APIVersion: policyv1.GroupVersion.Version, Resource: "clusteripampolicies", ResourceRequest: true}
}

// redactInstalled leaves out of an answer drawn from the installed policies what only their
// readers may see — the policy order and the interfaces' traces (variable values, Audit
// records and their messages, errors quoting expressions) and the cost they add up to — when caller may not list
// clusteripampolicies, and says so in status.omitted and a warning. What a VM's user sees
// in the VM's status anyway stays: the decision, reason, message and deciding policy.
// Candidate policies are the caller's own, and the shipped ones public: nothing to hide.
func (r *evaluations) redactInstalled(ctx context.Context, caller user.Info, status *dryrunv1.EvaluationStatus) error {
	if status.Policies.Source != dryrunv1.PoliciesInstalled {
		return nil
	}
	decision, _, err := r.authorizer.Authorize(ctx, listPolicies(caller))
	switch {
	case decision == authorizer.DecisionAllow:
		return nil
	case err != nil:
		return apierrors.NewInternalError(fmt.Errorf("authorizing the trace of the installed policies: %w", err))
	}
	status.Policies.Order = nil
	for i := range status.Interfaces {
		status.Interfaces[i].Decision.Trace = dryrunv1.Trace{}
		// The cost sums every policy evaluated, hidden Audit ones too: how far their rules
		// got, and so what their variables hold, would show through it.
		status.Interfaces[i].Decision.Cost = 0
	}
	status.Omitted = append(status.Omitted, dryrunv1.OmittedPolicyDetails)
	warn(ctx, []string{dryrunv1.OmittedPolicyDetails})
	return nil
}

// invalid is the 422 Invalid of an Evaluation with errs, tidied.
func invalid(ev *dryrunv1.Evaluation, errs field.ErrorList) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: dryrunv1.GroupName, Kind: dryrunv1.Kind}, ev.Name, tidy(errs))
}

// Bounds of what an error echoes of the request, in bytes.
const (
	maxEchoedValue  = 256
	maxEchoedDetail = 1024
)

// tidy keeps a 422 about the request, not a copy of it: a value that is too long is
// reported as that alone (not also compiled: a 1 MB expression's compile errors say nothing
// more), and no value or detail echoes more than a few hundred bytes of what was sent.
func tidy(errs field.ErrorList) field.ErrorList {
	tooLong := map[string]bool{}
	for _, e := range errs {
		if e.Type == field.ErrorTypeTooLong {
			tooLong[e.Field] = true
		}
	}
	out := make(field.ErrorList, 0, len(errs))
	for _, e := range errs {
		if tooLong[e.Field] && e.Type != field.ErrorTypeTooLong {
			continue
		}
		c := *e
		if v, ok := c.BadValue.(string); ok {
			c.BadValue = shorten(v, maxEchoedValue)
		}
		c.Detail = shorten(c.Detail, maxEchoedDetail)
		out = append(out, &c)
	}
	return out
}

// shorten cuts s to at most max bytes (on a rune boundary), saying how long it was.
func shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:cut], len(s))
}

// callerOf is the authenticated user of the request (the front proxy's X-Remote-User).
func callerOf(ctx context.Context) user.Info {
	if u, ok := genericapirequest.UserFrom(ctx); ok {
		return u
	}
	return &user.DefaultInfo{Name: user.Anonymous}
}

// rawOf is the JSON of a manifest in spec (nil when absent).
func rawOf(ext *runtime.RawExtension) json.RawMessage {
	if ext == nil {
		return nil
	}
	if ext.Raw == nil && ext.Object != nil {
		data, err := json.Marshal(ext.Object)
		if err == nil {
			return data
		}
	}
	return ext.Raw
}

// pastDeadline says whether err is the evaluation running out of time, whichever call
// noticed it: the context ended, a call returned context.DeadlineExceeded, the API server
// timed out, or a client's rate limiter refused to wait past the deadline (x/time/rate's
// "would exceed context deadline", which wraps nothing). A 422 or 403 found first stays.
func pastDeadline(ctx context.Context, err error) bool {
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
		return false
	}
	return ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) ||
		strings.Contains(err.Error(), "would exceed context deadline") || strings.Contains(err.Error(), context.DeadlineExceeded.Error())
}

// statusCode is the HTTP status of Create's answer.
func statusCode(err error) int {
	if err == nil {
		return http.StatusCreated
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return int(st.Status().Code)
	}
	return http.StatusInternalServerError
}

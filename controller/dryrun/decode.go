package dryrun

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/internal/manifest"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// DecodeOptions tune Decode and DecodeBody.
type DecodeOptions struct {
	// Root is where the body sits in the object the caller sent, prefixed to every field
	// path (the API server: spec, so that errors read spec.vm.spec.networks[1].type); nil
	// for a bare body (ipamctl).
	Root *field.Path
	// DefaultNamespace is the namespace of a VM manifest that names none (the Evaluation's
	// namespace, ipamctl's --namespace); when empty, such a VM is invalid.
	DefaultNamespace string
	// Authorize, when set, is asked whether the caller may have this request answered, once
	// the VM's namespace is known and before the candidate policies are compiled (the costly
	// part of validation, done only for callers that may ask): namespace is the VM's, and
	// withPolicies says whether the request carries candidate policies. Decode returns an
	// error of Authorize as it is. When the namespace cannot be read, Authorize is not called
	// and the candidate policies are not compiled; the other problems are still reported.
	Authorize func(namespace string, withPolicies bool) error
}

// Decode parses a request body (JSON or YAML) and decodes it as DecodeBody does. A body that
// cannot be read at all (not YAML, not an object) is an *InvalidError at "body"; an unknown
// top-level field is reported with the other problems.
func (e *Engine) Decode(ctx context.Context, data []byte, opts DecodeOptions) (*Request, error) {
	body, errs := parseBody(data)
	if body == nil {
		return nil, invalid(errs)
	}
	req, err := e.DecodeBody(ctx, body, opts)
	var inv *InvalidError
	switch {
	case len(errs) == 0:
		return req, err
	case err == nil:
		return nil, invalid(errs)
	case errors.As(err, &inv):
		return nil, invalid(inBodyOrder(nil, append(errs, inv.Errs...)))
	}
	return nil, err
}

// DecodeBody validates a request and compiles its candidate policies. Every problem it can
// find is reported at once in one *InvalidError, each with its JSON path below opts.Root: a
// VM or object failing its CRD schema or metadata validation, a VM without additional
// networks, an object outside the VM's namespace or of a kind a request may not carry, a
// candidate policy with unknown fields or that does not compile, more candidate policies, or
// more CEL source or type-checking work in them together, than a request may carry
// (MaxPolicies, MaxPoliciesSourceBytes, MaxPoliciesCheckWork). The parts of a request are
// checked independently of each other. ctx is checked between the candidate policies'
// compiles: once it is done, DecodeBody returns its error, wrapped.
func (e *Engine) DecodeBody(ctx context.Context, body *Body, opts DecodeOptions) (*Request, error) {
	root := opts.Root
	vmPath := root.Child("vm")
	vm, errs := e.decodeVM(vmPath, body.VM, opts)
	namespace := ""
	if vm != nil && !hasErrorAt(errs, vmPath.Child("metadata", "namespace").String()) {
		namespace = vm.Namespace
	}
	candidates, perrs := e.decodePolicies(root.Child("policies"), body.Policies)
	errs = append(errs, perrs...)
	objects, oerrs := e.decodeObjects(root.Child("objects"), body.Objects, namespace, opts.Root == nil)
	errs = append(errs, oerrs...)
	if opts.Authorize != nil {
		if namespace == "" {
			return nil, invalid(inBodyOrder(root, errs)) // nobody to ask whether compiling is allowed
		}
		if err := opts.Authorize(namespace, body.Policies != nil); err != nil {
			return nil, err
		}
	}
	set, cerrs, err := e.compileCandidates(ctx, root.Child("policies"), candidates)
	if err != nil {
		return nil, err
	}
	errs = appendNew(errs, cerrs)
	if len(errs) > 0 {
		return nil, invalid(inBodyOrder(root, errs))
	}
	req := &Request{VM: vm, Objects: objects, compiled: set}
	if body.Policies != nil {
		req.Policies = make([]v1alpha1.ClusterIPAMPolicy, len(candidates))
		for i, c := range candidates {
			req.Policies[i] = *c.policy
		}
	}
	return req, nil
}

// inBodyOrder sorts errs by the part of the body below root they are in — vm, then each
// policy and each object by index — keeping their order within a part.
func inBodyOrder(root *field.Path, errs field.ErrorList) field.ErrorList {
	type place struct{ part, index int }
	prefix := ""
	if root != nil {
		prefix = root.String() + "."
	}
	of := func(e *field.Error) place {
		for i, part := range []string{"vm", "policies", "objects"} {
			rest, ok := strings.CutPrefix(strings.TrimPrefix(e.Field, prefix), part)
			if !ok || rest != "" && rest[0] != '.' && rest[0] != '[' {
				continue
			}
			index := -1
			if digits, _, found := strings.Cut(strings.TrimPrefix(rest, "["), "]"); found && strings.HasPrefix(rest, "[") {
				index, _ = strconv.Atoi(digits)
			}
			return place{i + 1, index}
		}
		return place{}
	}
	slices.SortStableFunc(errs, func(a, b *field.Error) int {
		pa, pb := of(a), of(b)
		return cmp.Or(cmp.Compare(pa.part, pb.part), cmp.Compare(pa.index, pb.index))
	})
	return errs
}

// hasErrorAt says whether errs has an error at the field path fieldPath.
func hasErrorAt(errs field.ErrorList, fieldPath string) bool {
	for _, e := range errs {
		if e.Field == fieldPath {
			return true
		}
	}
	return false
}

// parseBody converts YAML to JSON and decodes the envelope strictly. It returns a nil body
// when the request cannot be read, and errors for unknown top-level fields.
func parseBody(data []byte) (*Body, field.ErrorList) {
	root := field.NewPath("body")
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, field.ErrorList{field.Required(root, "a JSON or YAML object with vm, and optionally policies and objects")}
	}
	data, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(root, field.OmitValueType{}, "not valid JSON or YAML: "+err.Error())}
	}
	if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		return nil, field.ErrorList{field.Invalid(root, field.OmitValueType{}, "must be an object with vm, and optionally policies and objects")}
	}
	body := &Body{}
	strict, err := sigsjson.UnmarshalStrict(data, body)
	if err != nil {
		return nil, field.ErrorList{typeError(nil, err)}
	}
	return body, strictErrors(nil, strict)
}

// decodeVM validates the VM manifest and returns it typed, also when it has problems (its
// namespace is needed to check the objects); nil when it is not a VirtualMachine object.
func (e *Engine) decodeVM(path *field.Path, raw json.RawMessage, opts DecodeOptions) (*vmv1.VirtualMachine, field.ErrorList) {
	if isNull(raw) {
		return nil, field.ErrorList{field.Required(path, "the VirtualMachine to evaluate")}
	}
	gvk := vmv1.GroupVersion.WithKind("VirtualMachine")
	obj, errs := e.decodeManifest(path, raw, &gvk)
	if obj == nil {
		return nil, errs
	}
	vm := &vmv1.VirtualMachine{}
	if err := intoTyped(path, obj, vm); err != nil {
		if len(errs) == 0 { // the schema reports wrong types better
			errs = append(errs, err)
		}
		return nil, errs
	}
	if vm.Namespace == "" {
		vm.Namespace = opts.DefaultNamespace
	}
	if opts.Root == nil { // offline; the dry-run API reports unknown fields by fieldValidation
		errs = appendNew(errs, e.schemas.unknownNICFields(path, gvk, obj))
		errs = appendNew(errs, e.schemas.otherCaseFields(path, gvk, obj))
	}
	errs = appendNew(errs, validateMeta(path, vm, true))
	if n := len(vm.Spec.Networks); n > MaxInterfaces {
		return vm, append(errs, field.TooMany(path.Child("spec", "networks"), n, MaxInterfaces))
	}
	return vm, appendNew(errs, networkNames(path, vm))
}

// MaxInterfaces bounds the interfaces of the VM a dry run evaluates. The VirtualMachine CRD
// sets no maxItems on spec.networks, and an answer carries a decision and trace per interface
// (a few KiB each): 30,000 interfaces in a 1 MB request answered 84 MB and grew the
// controller by a gigabyte. 256 is far past what a VM's PCI topology attaches; more is a 422
// at spec.networks before anything is evaluated.
const MaxInterfaces = 256

// networkNames requires the name of every Network and ClusterNetwork interface: the CRD
// lets a manifest leave it out (Main has none), and an answer about a network without a name
// would only say that "ClusterNetwork " does not exist.
func networkNames(path *field.Path, vm *vmv1.VirtualMachine) field.ErrorList {
	var errs field.ErrorList
	for i, n := range vm.Spec.Networks {
		if n.Name == "" && (n.Type == vmv1.NetworkTypeNetwork || n.Type == vmv1.NetworkTypeClusterNetwork) {
			errs = append(errs, field.Required(path.Child("spec", "networks").Index(i).Child("name"),
				fmt.Sprintf("a %s interface names its network", n.Type)))
		}
	}
	return errs
}

// candidate is a policy of a request that could be decoded (it may still have problems), and
// its index in the request.
type candidate struct {
	index  int
	policy *v1alpha1.ClusterIPAMPolicy
}

// MaxPolicies bounds the candidate policies of a request (spec.policies). Each is decoded,
// validated and compiled for the request alone, and compiling is the costly part: the 3 MiB
// body held ~48 policies of 62 KB, ~45 s of CPU to compile (issue #15). 64 is past the
// policies a cluster is expected to install (a dry run replaces them all); more is a 422 at
// spec.policies before any is looked at.
const MaxPolicies = 64

// MaxPoliciesSourceBytes bounds the CEL source a request's candidate policies hold together,
// as evaluator.MaxPolicySourceBytes (64 KiB) counts it for one: four policies' worth, each
// ~0.4 s of CPU to compile at worst (BenchmarkCompileWorstCase), while the built-in default
// holds ~2.5 KiB.
// More is a 422 at spec.policies, and nothing is compiled.
const MaxPoliciesSourceBytes = 4 * evaluator.MaxPolicySourceBytes

// MaxPoliciesCheckWork bounds the type checker's work (evaluator.MaxPolicyCheckWork's units)
// on a request's candidate policies together: four policies' worth, while the built-in
// default spends ~3,600. The expression that would cross it is refused at its path, as one
// crossing its policy's own bound is.
const MaxPoliciesCheckWork = 4 * evaluator.MaxPolicyCheckWork

// decodePolicies validates the candidate policies and returns those that could be decoded:
// none when there are more than MaxPolicies, or more than MaxPoliciesSourceBytes of CEL
// source in them together (a 422 at path).
func (e *Engine) decodePolicies(path *field.Path, raws []json.RawMessage) ([]candidate, field.ErrorList) {
	if raws == nil {
		return nil, nil
	}
	if len(raws) > MaxPolicies {
		return nil, field.ErrorList{field.TooMany(path, len(raws), MaxPolicies)}
	}
	out := make([]candidate, 0, len(raws))
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, raw := range raws {
		p, perrs := e.decodePolicy(path.Index(i), raw)
		errs = append(errs, perrs...)
		if p == nil || slices.ContainsFunc(perrs, func(e *field.Error) bool { return e.Type == field.ErrorTypeTooLong }) {
			continue // a value past its schema's maxLength is not compiled: its compile errors would tell nothing more
		}
		if seen[p.Name] && p.Name != "" {
			errs = append(errs, field.Duplicate(path.Index(i).Child("metadata", "name"), p.Name))
		}
		seen[p.Name] = true
		out = append(out, candidate{index: i, policy: p})
	}
	if err := candidateBounds(path, out); err != nil {
		return nil, append(errs, err)
	}
	return out, errs
}

// candidateBounds refuses, at path, more than MaxPolicies candidates, or candidates holding
// more than MaxPoliciesSourceBytes of CEL source together.
func candidateBounds(path *field.Path, candidates []candidate) *field.Error {
	if len(candidates) > MaxPolicies {
		return field.TooMany(path, len(candidates), MaxPolicies)
	}
	total := 0
	for _, c := range candidates {
		total += evaluator.SourceBytes(&c.policy.Spec)
	}
	if total <= MaxPoliciesSourceBytes {
		return nil
	}
	return field.Forbidden(path, fmt.Sprintf("the candidate policies' CEL expressions hold %d bytes together, beyond the %d "+
		"a request's may hold (compiling takes time in proportion): send fewer or smaller policies", total, MaxPoliciesSourceBytes))
}

// compileCandidates compiles the candidate policies as new ones (as the admission webhook
// does on create), within one MaxPoliciesCheckWork, into a Set with the built-in default; nil
// when there are none. Errors carry the policy's index (policies[i].spec…). It stops, with
// ctx's error, when ctx is done before a policy: a compile cannot be interrupted, so a
// request past its deadline finishes at most the policy it is compiling.
func (e *Engine) compileCandidates(ctx context.Context, path *field.Path, candidates []candidate) (*evaluator.Set, field.ErrorList, error) {
	if candidates == nil {
		return nil, nil, nil
	}
	compiled := make([]*evaluator.Policy, 0, len(candidates))
	var errs field.ErrorList
	shared := evaluator.NewCheckWorkAllowance(MaxPoliciesCheckWork, "a request's candidate policies")
	for _, c := range candidates {
		if err := ctx.Err(); err != nil {
			return nil, nil, fmt.Errorf("compiling the candidate policies: %w", context.Cause(ctx))
		}
		p, cerrs := e.compiler.CompileWithin(c.policy, nil, shared)
		if len(cerrs) > 0 {
			errs = append(errs, under(path.Index(c.index), cerrs)...)
			if e.OnCompileError != nil {
				e.OnCompileError()
			}
			continue
		}
		compiled = append(compiled, p)
	}
	if len(errs) > 0 {
		return nil, errs, nil
	}
	return evaluator.NewSet(compiled, e.builtin), nil, nil
}

// CheckPolicy validates one ClusterIPAMPolicy manifest (JSON) as a request's candidate
// policy is validated — CRD schema, strictly (an unknown field is an error), metadata — and
// compiles it as a new policy. It returns the policy, when it could be read, and every
// problem with its path below path, each once. ipamctl lint uses it.
func (e *Engine) CheckPolicy(path *field.Path, raw json.RawMessage) (*v1alpha1.ClusterIPAMPolicy, field.ErrorList) {
	p, errs := e.decodePolicy(path, raw)
	if p == nil {
		return nil, errs
	}
	if PastSizeBounds(errs) {
		return p, errs
	}
	if _, cerrs := e.compiler.Compile(p, nil); len(cerrs) > 0 {
		errs = appendNew(errs, under(path, cerrs))
	}
	return p, errs
}

// PastSizeBounds: errs has a schema error for a value past the CRD's maxLength or maxItems.
// Such a policy is not compiled: in the cluster the API server refuses it on its schema
// before the webhook compiles anything, and compiling what the bounds exist to keep out
// took seconds (an 813 KB policy of 13,000 regex literals: 4.1 s, only to be refused).
func PastSizeBounds(errs field.ErrorList) bool {
	for _, err := range errs {
		if err.Type == field.ErrorTypeTooLong || err.Type == field.ErrorTypeTooMany {
			return true
		}
	}
	return false
}

// DecodePolicies reads the ClusterIPAMPolicy documents of one file (YAML or JSON, documents
// separated by "---", empty ones skipped) as a request's candidate policies are read:
// validated against the CRD's schema, nulls dropped and defaults filled, decoded
// case-sensitively with unknown and duplicate fields refused. It is the
// policytest.Decoder of `ipamctl test`, so that a suite's policies are read as `ipamctl
// lint`, `ipamctl evaluate` and the dry-run API read them: policies.Decode matched field names
// in any case, and a policy whose `Match:` the cluster drops passed its suite with the
// selector applied (issue #15, tester atk18). An error names the document (from 0) and its
// problems by field path.
func (e *Engine) DecodePolicies(data []byte) ([]v1alpha1.ClusterIPAMPolicy, error) {
	docs, err := manifest.Split(data)
	if err != nil {
		return nil, err
	}
	if len(docs) == 0 {
		return nil, errors.New("no ClusterIPAMPolicy in the file")
	}
	gvk := v1alpha1.GroupVersion.WithKind("ClusterIPAMPolicy")
	out := make([]v1alpha1.ClusterIPAMPolicy, 0, len(docs))
	for _, doc := range docs {
		var head map[string]any
		if err := json.Unmarshal(doc.JSON, &head); err == nil && head != nil {
			if errs := checkKind(nil, head, nil); len(errs) > 0 { // a file names its kind, as for kubectl
				return nil, fmt.Errorf("document %d: %w", doc.Index, errs.ToAggregate())
			}
			if gvkOf(head) != gvk {
				return nil, fmt.Errorf("document %d: a %s, want a %s", doc.Index, gvkOf(head).Kind, gvk.Kind)
			}
		}
		p, errs := e.decodePolicy(nil, doc.JSON)
		if len(errs) > 0 {
			return nil, fmt.Errorf("document %d: %w", doc.Index, errs.ToAggregate())
		}
		out = append(out, *p)
	}
	return out, nil
}

// decodePolicy validates a policy manifest and decodes it strictly. It returns the policy
// whenever it could be decoded (also with errors, so that CheckPolicy can compile it too).
func (e *Engine) decodePolicy(path *field.Path, raw json.RawMessage) (*v1alpha1.ClusterIPAMPolicy, field.ErrorList) {
	gvk := v1alpha1.GroupVersion.WithKind("ClusterIPAMPolicy")
	obj, errs := e.decodeManifest(path, raw, &gvk)
	if obj == nil {
		return nil, errs
	}
	defaulted, err := json.Marshal(obj) // nulls dropped and the CRD's defaults filled
	if err != nil {
		return nil, append(errs, field.InternalError(path, err))
	}
	p := &v1alpha1.ClusterIPAMPolicy{}
	strict, err := sigsjson.UnmarshalStrict(defaulted, p)
	if err != nil {
		if len(errs) == 0 { // the schema reports wrong types better
			errs = append(errs, typeError(path, err))
		}
		return nil, errs
	}
	p.APIVersion, p.Kind = gvk.GroupVersion().String(), gvk.Kind
	errs = appendNew(errs, strictErrors(path, strict)) // unknown metadata fields are found by both
	return p, append(errs, validateMeta(path, p, false)...)
}

// appendNew appends the errors of more whose field and type are not in errs yet (the
// compiler checks some enums and patterns the schema checks too).
func appendNew(errs, more field.ErrorList) field.ErrorList {
	for _, m := range more {
		dup := false
		for _, e := range errs {
			dup = dup || e.Field == m.Field && e.Type == m.Type
		}
		if !dup {
			errs = append(errs, m)
		}
	}
	return errs
}

func (e *Engine) decodeObjects(path *field.Path, raws []json.RawMessage, namespace string, offline bool) ([]client.Object, field.ErrorList) {
	var (
		out  []client.Object
		errs field.ErrorList
	)
	seen := map[string]int{}
	for i, raw := range raws {
		obj, oerrs := e.decodeObject(path.Index(i), raw, namespace, offline)
		errs = append(errs, oerrs...)
		if obj == nil {
			continue
		}
		key := fmt.Sprintf("%s %s/%s", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName())
		if j, dup := seen[key]; dup {
			errs = append(errs, field.Duplicate(path.Index(i), fmt.Sprintf("%s, as objects[%d]", key, j)))
			continue
		}
		seen[key] = i
		out = append(out, obj)
	}
	return out, errs
}

// decodeObject validates one overlay object and returns it typed: a kind a request may
// carry, in the VM's namespace (the default) or cluster-scoped, valid against its schema. An
// empty namespace means the VM's is not known (the VM is invalid): the object's namespace is
// then not checked against it.
func (e *Engine) decodeObject(path *field.Path, raw json.RawMessage, namespace string, offline bool) (client.Object, field.ErrorList) {
	obj, errs := e.decodeManifest(path, raw, nil)
	if obj == nil {
		return nil, errs
	}
	gvk := gvkOf(obj)
	if offline { // the dry-run API reports unknown fields by fieldValidation
		errs = appendNew(errs, e.schemas.otherCaseFields(path, gvk, obj))
	}
	kind, ok := allowedKinds[gvk]
	if !ok {
		return nil, append(errs, field.NotSupported(path.Child("kind"), gvk.Kind+" "+gvk.GroupVersion().String(), allowedKindNames()))
	}
	typed, err := e.scheme.New(gvk)
	if err != nil {
		return nil, append(errs, field.InternalError(path, err))
	}
	out, ok := typed.(client.Object)
	if !ok {
		return nil, append(errs, field.InternalError(path, fmt.Errorf("%s is not an object with metadata", gvk.Kind)))
	}
	if err := intoTyped(path, obj, out); err != nil {
		if len(errs) == 0 { // the schema reports wrong types better
			errs = append(errs, err)
		}
		return nil, errs
	}
	out.GetObjectKind().SetGroupVersionKind(gvk)
	namespaced := kind.namespaced
	if namespace != "" {
		errs = appendNew(errs, kind.place(path.Child("metadata"), out, namespace))
	} else if out.GetNamespace() == "" {
		namespaced = false // it would get the VM's namespace, which is not known
	}
	errs = appendNew(errs, withoutOwnerUIDs(out, validateMeta(path, out, namespaced)))
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// decodeManifest decodes raw into a JSON object, checks apiVersion and kind — defaulted to
// *want when absent and then required to equal it; required when want is nil — and
// validates it against its CRD schema. It returns the object (nil when it is not an object
// of the expected kind) and the problems found.
func (e *Engine) decodeManifest(path *field.Path, raw json.RawMessage, want *schema.GroupVersionKind) (map[string]any, field.ErrorList) {
	var obj map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &obj); err != nil || obj == nil {
		return nil, field.ErrorList{field.Invalid(path, field.OmitValueType{}, "must be a Kubernetes object (a JSON or YAML mapping)")}
	}
	if errs := checkKind(path, obj, want); len(errs) > 0 {
		return nil, errs
	}
	return obj, append(unknownMetadata(path, obj), e.schemas.validate(path, gvkOf(obj), obj)...)
}

// unknownMetadata reports the fields of obj's metadata that ObjectMeta does not declare, as
// the API server's decoding of metadata finds them (for every kind: a CRD's schema leaves
// metadata open, and the trimmed schemas know no more). The dry-run API has already dropped
// them unless the request asked for Strict; offline (ipamctl) they are errors, as under
// kubectl's default. Metadata of the wrong type is left to the typed decoding to report.
func unknownMetadata(path *field.Path, obj map[string]any) field.ErrorList {
	_, _, unknown, err := schemaobjectmeta.GetObjectMetaWithOptions(obj,
		schemaobjectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true, ParentPath: path})
	if err != nil {
		return nil
	}
	var errs field.ErrorList
	for _, p := range unknown {
		errs = append(errs, &field.Error{Type: field.ErrorTypeInvalid, Field: p, BadValue: field.OmitValueType{}, Detail: "unknown field"})
	}
	return errs
}

func checkKind(path *field.Path, obj map[string]any, want *schema.GroupVersionKind) field.ErrorList {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if want == nil {
		var errs field.ErrorList
		if apiVersion == "" {
			errs = append(errs, field.Required(path.Child("apiVersion"), ""))
		}
		if kind == "" {
			errs = append(errs, field.Required(path.Child("kind"), ""))
		}
		return errs
	}
	if apiVersion == "" && kind == "" {
		obj["apiVersion"], obj["kind"] = want.GroupVersion().String(), want.Kind
		return nil
	}
	if apiVersion != want.GroupVersion().String() || kind != want.Kind {
		return field.ErrorList{field.NotSupported(path.Child("kind"), kind+" "+apiVersion,
			[]string{want.Kind + " " + want.GroupVersion().String()})}
	}
	return nil
}

func gvkOf(obj map[string]any) schema.GroupVersionKind {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	return schema.FromAPIVersionAndKind(apiVersion, kind)
}

// validateMeta checks metadata as the API server does on create (name, namespace, labels,
// annotations, ownerReferences, …), and that a name is given.
func validateMeta(path *field.Path, obj client.Object, namespaced bool) field.ErrorList {
	mpath := path.Child("metadata")
	if obj.GetName() == "" {
		return field.ErrorList{field.Required(mpath.Child("name"), "")}
	}
	return apivalidation.ValidateObjectMetaAccessor(obj, namespaced, apivalidation.NameIsDNSSubdomain, mpath)
}

// strictErrors turns the unknown and duplicate fields sigs.k8s.io/json reports into field
// errors below path.
func strictErrors(path *field.Path, errs []error) field.ErrorList {
	var out field.ErrorList
	for _, err := range errs {
		var fe interface{ FieldPath() string }
		if !errors.As(err, &fe) {
			out = append(out, field.Invalid(path, field.OmitValueType{}, err.Error()))
			continue
		}
		detail, _, _ := strings.Cut(err.Error(), ` "`)
		out = append(out, &field.Error{Type: field.ErrorTypeInvalid, Field: join(pathString(path), fe.FieldPath()),
			BadValue: field.OmitValueType{}, Detail: detail})
	}
	return out
}

// intoTyped decodes the manifest obj (at path) into the typed out. A value of the wrong type
// is reported at its own path (spec.vm.metadata.labels.a), which the unstructured converter's
// error does not name: what the CRD schemas leave unchecked (metadata) is caught here.
func intoTyped(path *field.Path, obj map[string]any, out any) *field.Error {
	data, err := json.Marshal(obj)
	if err != nil {
		return field.InternalError(path, err)
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, out); err != nil {
		if fe := timestampError(path, obj, err); fe != nil {
			return fe
		}
		fe := typeError(path, err)
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if key, ok := mapKeyOf(obj, te); ok { // the decoder names the map, not its entry
				fe.Field += "." + key
			}
		}
		return fe
	}
	return nil
}

// timestampError is err at the metadata timestamp whose text it could not parse
// (creationTimestamp: yesterday), or nil: time's error names the text, not the field.
func timestampError(path *field.Path, obj map[string]any, err error) *field.Error {
	var pe *time.ParseError
	if !errors.As(err, &pe) {
		return nil
	}
	for _, name := range []string{"creationTimestamp", "deletionTimestamp"} {
		if v, _, _ := unstructured.NestedString(obj, "metadata", name); v == pe.Value {
			return field.Invalid(path.Child("metadata", name), v, "must be a time in RFC 3339 form (2026-12-02T10:00:00Z)")
		}
	}
	return nil
}

// mapKeyOf finds, when the decoder's te is about a value inside a map (labels: {a: 5} is
// reported at metadata.labels), the key of the first entry of that map whose JSON type is
// the one te names.
func mapKeyOf(obj map[string]any, te *json.UnmarshalTypeError) (string, bool) {
	var at any = obj
	for _, name := range strings.Split(te.Field, ".") {
		m, ok := at.(map[string]any)
		if !ok {
			return "", false
		}
		at = m[name]
	}
	m, ok := at.(map[string]any)
	if !ok || te.Type.Kind() == reflect.Map || te.Type.Kind() == reflect.Struct {
		return "", false
	}
	keys := slices.Sorted(maps.Keys(m))
	for _, k := range keys {
		if jsonType(m[k]) == te.Value {
			return k, true
		}
	}
	return "", false
}

// jsonType is the JSON type name of a decoded value, as json.UnmarshalTypeError.Value has it.
func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "bool"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case nil:
		return "null"
	}
	return "number"
}

// typeError reports a JSON value of the wrong type, below path when the decoder names the
// field.
func typeError(path *field.Path, err error) *field.Error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return field.Invalid(path, field.OmitValueType{}, err.Error())
	}
	want := "a " + te.Type.Kind().String()
	switch te.Type.Kind() {
	case reflect.Slice:
		want = "a list"
	case reflect.Struct, reflect.Map:
		want = "an object"
	}
	return &field.Error{Type: field.ErrorTypeTypeInvalid, Field: join(pathString(path), te.Field),
		BadValue: field.OmitValueType{}, Detail: fmt.Sprintf("must be %s, not %s", want, te.Value)}
}

func pathString(p *field.Path) string {
	if p == nil {
		return ""
	}
	return p.String()
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// withoutOwnerUIDs drops the errors about VirtualMachine ownerReferences without a UID: an
// overlay object may refer to its VM by name; Evaluate fills the UID in.
func withoutOwnerUIDs(obj client.Object, errs field.ErrorList) field.ErrorList {
	out := errs[:0]
	for _, e := range errs {
		if e.Type == field.ErrorTypeRequired && strings.HasSuffix(e.Field, ".uid") && vmOwnerRefWithoutUID(obj, e.Field) {
			continue
		}
		out = append(out, e)
	}
	return out
}

func vmOwnerRefWithoutUID(obj client.Object, fieldPath string) bool {
	for i, ref := range obj.GetOwnerReferences() {
		if ref.UID == "" && ref.Kind == "VirtualMachine" && strings.HasSuffix(fieldPath, fmt.Sprintf("ownerReferences[%d].uid", i)) {
			return true
		}
	}
	return false
}

package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vmipam/vmipam/controller/dryrun"
	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
)

// input is what evaluate and dry-run ask about: the VMs of -f, each with the same policies
// and objects.
type input struct {
	vms []document
	// policies are nil when no -p was given: then the installed (online) or the shipped
	// default (offline) policies decide.
	policies []document
	objects  []document
}

// requestFlags are the file flags evaluate and dry-run share.
type requestFlags struct {
	files, policies, objects []string
	output                   string
	// recursive: directories are read with their subdirectories (-R).
	recursive bool
}

func (f *requestFlags) load(stdin io.Reader) (*input, error) {
	if len(f.files) == 0 {
		return nil, usageError{errors.New("-f/--filename is required: the VirtualMachine manifest to evaluate")}
	}
	if err := checkOutput(f.output); err != nil {
		return nil, err
	}
	docs, err := readDocuments(f.files, f.recursive, stdin)
	if err != nil {
		return nil, err
	}
	in := &input{}
	var rest []document
	if in.vms, rest = ofKind(docs, kindVM); len(rest) > 0 {
		return nil, fmt.Errorf("%s: -f takes VirtualMachines, not %s; %s", rest[0].source, kinds(rest), flagHint(rest))
	}
	if len(in.vms) == 0 {
		return nil, errors.New("no VirtualMachine in the -f files")
	}
	if in.objects, err = readDocuments(f.objects, f.recursive, stdin); err != nil {
		return nil, err
	}
	if policies, _ := ofKind(in.objects, kindPolicy); len(policies) > 0 {
		return nil, fmt.Errorf("%s: -O takes objects to lay over the cluster's state, not %s; %s",
			policies[0].source, kindPolicy, flagHint(policies))
	}
	if len(f.policies) == 0 {
		return in, nil
	}
	docs, err = readDocuments(f.policies, f.recursive, stdin)
	if err != nil {
		return nil, err
	}
	if in.policies, rest = ofKind(docs, kindPolicy); len(rest) > 0 {
		return nil, fmt.Errorf("%s: -p takes ClusterIPAMPolicies, not %s; %s", rest[0].source, kinds(rest), flagHint(rest))
	}
	if len(in.policies) == 0 {
		return nil, errors.New("no ClusterIPAMPolicy in the -p files")
	}
	return in, nil
}

// The kinds evaluate and dry-run take in flags of their own.
const (
	kindVM     = "VirtualMachine"
	kindPolicy = "ClusterIPAMPolicy"
)

// flagHint says which flag takes each kind of docs: -f the VirtualMachines to evaluate, -p
// policies, -O everything else.
func flagHint(docs []document) string {
	var vms, policies, objects bool
	for _, d := range docs {
		switch d.kind {
		case kindVM:
			vms = true
		case kindPolicy:
			policies = true
		default:
			objects = true
		}
	}
	var hints []string
	if vms {
		hints = append(hints, "the VirtualMachine to evaluate with -f/--filename")
	}
	if policies {
		hints = append(hints, "policies with -p/--policy")
	}
	if objects {
		hints = append(hints, "other objects with -O/--objects")
	}
	return "pass " + strings.Join(hints, ", ")
}

// body is the request body for one VM, and where its parts came from.
func (in *input) body(vm document) ([]byte, sources, error) {
	b := dryrun.Body{VM: vm.json, Objects: raws(in.objects)}
	if in.policies != nil {
		b.Policies = raws(in.policies)
	}
	data, err := json.Marshal(b)
	return data, in.sources(vm), err
}

// evaluation is the Evaluation for one VM (without a namespace), and where its parts came
// from.
func (in *input) evaluation(vm document) (*dryrunv1.Evaluation, sources) {
	ev := &dryrunv1.Evaluation{Spec: dryrunv1.EvaluationSpec{VM: &runtime.RawExtension{Raw: vm.json},
		Objects: extensions(in.objects)}}
	if in.policies != nil {
		ev.Spec.Policies = extensions(in.policies)
	}
	return ev, in.sources(vm)
}

func (in *input) sources(vm document) sources {
	return sources{vm: vm.source, policies: sourcesOf(in.policies), objects: sourcesOf(in.objects)}
}

func extensions(docs []document) []runtime.RawExtension {
	if len(docs) == 0 {
		return nil
	}
	out := make([]runtime.RawExtension, len(docs))
	for i, d := range docs {
		out[i] = runtime.RawExtension{Raw: d.json}
	}
	return out
}

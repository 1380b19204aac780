package policytest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"reflect"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	sigsjson "sigs.k8s.io/json"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/internal/manifest"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Suite file identification.
const (
	APIVersion = "cli.ipam.virtualization.deckhouse.io/v1alpha1"
	Kind       = "PolicyTest"
)

// Suite is one policy test file.
type Suite struct {
	// APIVersion must be APIVersion.
	APIVersion string `json:"apiVersion"`
	// Kind must be Kind.
	Kind string `json:"kind"`
	// Policies are files of ClusterIPAMPolicy documents, relative to the suite file, glob
	// patterns allowed. Load reads them into Loaded.
	Policies []string `json:"policies,omitempty"`
	// Defaults is the evaluator.Input every case starts from.
	Defaults json.RawMessage `json:"defaults,omitempty"`
	// Cases are evaluated in order, each on its own.
	Cases []Case `json:"cases"`

	// Loaded are the policies the suite runs with; Load fills it from Policies, callers
	// of Parse may fill it themselves.
	Loaded []Policy `json:"-"`
}

// Policy is a policy of a suite and the file it came from.
type Policy struct {
	// File is the policy's file, as a path in the suite's fs.FS.
	File string
	// Policy is the decoded policy.
	Policy v1alpha1.ClusterIPAMPolicy
}

// Case is one interface input and what its decision must be.
type Case struct {
	// Name identifies the case in results; required.
	Name string `json:"name"`
	// Input is applied over the suite's defaults.
	Input json.RawMessage `json:"input,omitempty"`
	// Expect is what the decision must be; at least one expectation is required.
	Expect Expectation `json:"expect"`
}

// Expectation is what a decision must be; absent fields are not checked.
type Expectation struct {
	Allocation *evaluator.Allocation `json:"allocation,omitempty"` // evaluator.Decision.Allocation
	Skip       *bool                 `json:"skip,omitempty"`       // evaluator.Decision.Skip
	Reason     *evaluator.Reason     `json:"reason,omitempty"`     // evaluator.Decision.Reason ("" for none)
	Rule       *string               `json:"rule,omitempty"`       // evaluator.Decision.Rule
	// Policy is the deciding policy's name (evaluator.BuiltinPolicy for the built-in default).
	Policy *string `json:"policy,omitempty"`
	// Hotplug is evaluator.Decision.Hotplug.
	Hotplug *bool `json:"hotplug,omitempty"`
	// Provenance is which policy decided each part (evaluator.Decision.Provenance); "" for none.
	Provenance *ProvenanceExpectation `json:"provenance,omitempty"`
	// MessageContains must be a substring of the decision's message.
	MessageContains string `json:"messageContains,omitempty"`
	// Audit maps an Audit-mode policy's name to what it must have recorded (an evaluation
	// error reads as a PolicyError skip with evaluator.AllocationUnknown).
	Audit map[string]Expectation `json:"audit,omitempty"`
	// NoPolicyMatched: true when no policy of the suite may match the input (only the
	// built-in default decides), false when one must. When a suite has policies and none of
	// them matched a case, the case fails unless it expects this: a case that passes only
	// because the built-in default happens to agree tests nothing of the suite.
	NoPolicyMatched *bool `json:"noPolicyMatched,omitempty"`
}

// ProvenanceExpectation is what evaluator.Decision.Provenance must be; absent fields are not checked.
type ProvenanceExpectation struct {
	Allocation *string `json:"allocation,omitempty"` // Provenance.Allocation
	Skip       *string `json:"skip,omitempty"`       // Provenance.Skip
	Hotplug    *string `json:"hotplug,omitempty"`    // Provenance.Hotplug
}

// Result is the outcome of one case.
type Result struct {
	// Name is the case's name.
	Name string
	// Decision is what the evaluator decided.
	Decision evaluator.Decision
	// Diffs lists every expectation that did not hold, as "field: got X, want Y".
	Diffs []string
}

// Passed says whether every expectation held.
func (r Result) Passed() bool { return len(r.Diffs) == 0 }

// String renders the result as "PASS name (decided by <policy>)" or "FAIL name" followed
// by one indented line per diff.
func (r Result) String() string {
	if r.Passed() {
		return fmt.Sprintf("PASS %s (decided by %s)", r.Name, cmp.Or(r.Decision.Policy, "no policy"))
	}
	return "FAIL " + r.Name + "\n    " + strings.Join(r.Diffs, "\n    ")
}

// suiteMatched reports whether a policy other than the built-in default matched: d.Trace.Matched
// lists the matching policies, the built-in one as evaluator.BuiltinPolicy.
//
// A failed evaluation's trace is cut short (an abandoned one has none): its failing policy,
// when it is the suite's, matched as well: a case that hits the deadline under load is no
// case where "no policy of the suite matched".
func suiteMatched(d evaluator.Decision) bool {
	if d.Reason == evaluator.ReasonPolicyError && d.Policy != "" && d.Policy != evaluator.BuiltinPolicy {
		return true
	}
	return slices.ContainsFunc(d.Trace.Matched, func(p string) bool { return p != evaluator.BuiltinPolicy })
}

// Parse decodes a suite file strictly (an unknown field is an error) and checks that
// every case has a name, at least one expectation, allocations among Auto, Static and None,
// and an input that decodes over the defaults. A problem of a case names it, by index and
// name: cases[1] "static refused": unknown field "expect.skp". It does not read the policy
// files.
func Parse(data []byte) (*Suite, error) {
	docs, err := manifest.Split(data) // a key given twice is an error, as in a policy
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		// A second document would otherwise be dropped without a word.
		return nil, fmt.Errorf("%d documents, want one suite per file", len(docs))
	}
	js := docs[0].JSON
	var file suiteFile
	if err := unmarshalStrict(js, &file); err != nil {
		return nil, err
	}
	if file.APIVersion != APIVersion || file.Kind != Kind {
		return nil, fmt.Errorf("apiVersion %q kind %q, want %s %s", file.APIVersion, file.Kind, APIVersion, Kind)
	}
	if len(file.Cases) == 0 {
		return nil, errors.New("no cases")
	}
	s := &Suite{APIVersion: file.APIVersion, Kind: file.Kind, Policies: file.Policies, Defaults: file.Defaults,
		Cases: make([]Case, len(file.Cases))}
	for i, raw := range file.Cases {
		if err := unmarshalStrict(raw, &s.Cases[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", caseName(i, raw), err)
		}
		if err := s.checkCase(i, s.Cases[i]); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// suiteFile is a Suite as written, its cases still to be decoded one by one.
type suiteFile struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Policies   []string          `json:"policies,omitempty"`
	Defaults   json.RawMessage   `json:"defaults,omitempty"`
	Cases      []json.RawMessage `json:"cases"`
}

// caseName identifies case i in messages: cases[i], and its name when it has one.
func caseName(i int, raw json.RawMessage) string {
	var named struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &named) != nil || named.Name == "" {
		return fmt.Sprintf("cases[%d]", i)
	}
	return fmt.Sprintf("cases[%d] %q", i, named.Name)
}

// unmarshalStrict decodes JSON into v case-sensitively, reporting unknown and duplicate
// fields and values of the wrong type with their paths.
func unmarshalStrict(data []byte, v any) error {
	strict, err := sigsjson.UnmarshalStrict(data, v)
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return fmt.Errorf("%s: must be %s, not %s", te.Field, kindName(te.Type), te.Value)
	case errors.As(err, &te):
		return fmt.Errorf("must be %s, not %s", kindName(te.Type), te.Value)
	case err != nil:
		return err
	}
	return errors.Join(strict...)
}

// kindName names the JSON kind a Go type decodes from, for messages.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Bool:
		return "a bool"
	case reflect.String:
		return "a string"
	}
	return "a number"
}

func (s *Suite) checkCase(i int, c Case) error {
	switch {
	case c.Name == "":
		return fmt.Errorf("cases[%d]: a name is required", i)
	case c.Expect.empty():
		return fmt.Errorf("cases[%d] %q: expect is empty", i, c.Name)
	}
	if err := c.Expect.checkAllocations("expect"); err != nil {
		return fmt.Errorf("cases[%d] %q: %w", i, c.Name, err)
	}
	in, err := s.CaseInput(i)
	if err == nil {
		err = checkChange(in)
	}
	if err != nil {
		return fmt.Errorf("cases[%d] %q: %w", i, c.Name, err)
	}
	return nil
}

// checkAllocations reports an expected allocation other than Auto, Static and None ("" is
// evaluator.AllocationUnknown, the allocation of a failed evaluation), at path.
func (e Expectation) checkAllocations(path string) error {
	if e.Allocation != nil {
		switch *e.Allocation {
		case evaluator.AllocationAuto, evaluator.AllocationStatic, evaluator.AllocationNone, evaluator.AllocationUnknown:
		default:
			return fmt.Errorf("%s.allocation: Unsupported value %q: supported values: %q, %q, %q (\"\" for a failed evaluation)",
				path, *e.Allocation, evaluator.AllocationAuto, evaluator.AllocationStatic, evaluator.AllocationNone)
		}
	}
	for _, policy := range slices.Sorted(maps.Keys(e.Audit)) {
		if err := e.Audit[policy].checkAllocations(path + ".audit." + policy); err != nil {
			return err
		}
	}
	return nil
}

func (e Expectation) empty() bool {
	return e.Allocation == nil && e.Skip == nil && e.Reason == nil && e.Rule == nil && e.Policy == nil &&
		e.Hotplug == nil && e.Provenance == nil && e.MessageContains == "" && len(e.Audit) == 0 && e.NoPolicyMatched == nil
}

// CaseInput is the evaluator.Input of case i: the suite's defaults with the case's input applied as a
// JSON merge patch (RFC 7386: objects and maps merge, lists and scalars are replaced, null
// removes), decoded case-sensitively with unknown and duplicate fields refused: `VM: {Labels:
// …}` is no vm.labels, and null removes what the defaults set.
func (s *Suite) CaseInput(i int) (evaluator.Input, error) {
	merged := []byte("{}")
	for _, raw := range []json.RawMessage{s.Defaults, s.Cases[i].Input} {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var err error
		if merged, err = jsonpatch.MergePatch(merged, raw); err != nil {
			return evaluator.Input{}, fmt.Errorf("input: %w", err)
		}
	}
	var in evaluator.Input
	if err := unmarshalStrict(merged, &in); err != nil {
		return evaluator.Input{}, fmt.Errorf("input: %w", err)
	}
	return in, nil
}

// Decoder reads the ClusterIPAMPolicy documents of one file (YAML or JSON, documents
// separated by "---"), as policies.Decode does; an error names the document and field.
type Decoder func(data []byte) ([]v1alpha1.ClusterIPAMPolicy, error)

// Load reads the suite file name from fsys, parses it and loads the policy files it
// names, resolved against the suite file's directory within fsys, with decode (nil:
// policies.Decode). `ipamctl test` passes the dry-run engine's decoder, which `ipamctl lint`
// and `ipamctl evaluate` use too, so that a file is read alike by every front end.
func Load(fsys fs.FS, name string, decode Decoder) (*Suite, error) {
	if decode == nil {
		decode = policies.Decode
	}
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, pattern := range s.Policies {
		loaded, err := loadPolicies(fsys, path.Join(path.Dir(name), pattern), decode)
		if err != nil {
			return nil, fmt.Errorf("%s: policies: %w", name, err)
		}
		s.Loaded = append(s.Loaded, loaded...)
	}
	return s, nil
}

func loadPolicies(fsys fs.FS, pattern string, decode Decoder) ([]Policy, error) {
	files, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no such file", pattern)
	}
	var out []Policy
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		docs, err := decode(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, p := range docs {
			out = append(out, Policy{File: f, Policy: p})
		}
	}
	return out, nil
}

// Run compiles the suite's loaded policies as new ones (as the admission webhook
// would), with the shipped default as the built-in fallback, and decides every case with
// evaluator.Options.Explain. It fails, naming file, policy and field paths, when a policy does not
// compile; failed expectations are in the results.
func Run(ctx context.Context, c *evaluator.Compiler, s *Suite) ([]Result, error) {
	set, err := suiteSet(c, s.Loaded)
	if err != nil {
		return nil, err
	}
	results := make([]Result, len(s.Cases))
	for i, tc := range s.Cases {
		results[i].Name = tc.Name
		in, err := s.CaseInput(i)
		if err != nil {
			results[i].Diffs = []string{err.Error()}
			continue
		}
		d := set.Decide(ctx, in, evaluator.Options{Explain: true})
		results[i].Decision, results[i].Diffs = d, tc.Expect.diff(d)
		if inputRefused(d) {
			results[i].Diffs = append(results[i].Diffs, "the case's input is beyond the bounds policies are evaluated with: "+d.Message)
			continue
		}
		if d.Reason == evaluator.ReasonPolicyError && len(results[i].Diffs) > 0 {
			// Say why the decision differs: the evaluation failed, under load maybe by the deadline.
			results[i].Diffs = append([]string{"the evaluation failed (" + string(evaluator.ReasonPolicyError) + "): " + d.Message}, results[i].Diffs...)
		}
		switch matched := suiteMatched(d); {
		case tc.Expect.NoPolicyMatched != nil && *tc.Expect.NoPolicyMatched == matched:
			results[i].Diffs = append(results[i].Diffs, fmt.Sprintf("noPolicyMatched: got %t, want %t (matched: %v)",
				!matched, matched, d.Trace.Matched))
		case tc.Expect.NoPolicyMatched == nil && !matched && len(s.Loaded) > 0:
			results[i].Diffs = append(results[i].Diffs, "noPolicyMatched: no policy of the suite matched (the built-in default decided); "+
				"expect noPolicyMatched: true if that is what the case means")
		}
	}
	return results, nil
}

// inputRefused: a policy of d's evaluation refused the input as beyond the bounds of a field
// it reads, whether that failed the interface or was passed over.
// inputBeyond is how the evaluator's error of an input beyond the bounds reads, after the
// policy's name: "policy <name>: input: beyond the bounds …".
const inputBeyond = ": input: beyond the bounds"

func inputRefused(d evaluator.Decision) bool {
	return slices.ContainsFunc(append([]string{d.Message}, d.Trace.Errors...), func(e string) bool {
		return strings.HasPrefix(e, "policy ") && strings.Contains(e, inputBeyond)
	})
}

func suiteSet(c *evaluator.Compiler, loaded []Policy) (*evaluator.Set, error) {
	var compiled []*evaluator.Policy
	var errs []error
	for _, sp := range loaded {
		p, fieldErrs := c.Compile(&sp.Policy, nil)
		if len(fieldErrs) > 0 {
			errs = append(errs, fmt.Errorf("%s: policy %s: %w", sp.File, sp.Policy.Name, fieldErrs.ToAggregate()))
			continue
		}
		compiled = append(compiled, p)
	}
	builtin, err := policies.Builtin()
	if err != nil {
		return nil, err
	}
	fallback, fieldErrs := c.Compile(builtin, builtin)
	if len(fieldErrs) > 0 {
		errs = append(errs, fmt.Errorf("built-in policy: %w", fieldErrs.ToAggregate()))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return evaluator.NewSet(compiled, fallback), nil
}

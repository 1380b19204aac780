package evaluator

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

	"github.com/vmipam/vmipam/internal/manifest"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Policy test suites: YAML files of interface inputs and the decisions expected for them,
// run by the golden tests of samples/cases and by `ipamctl test` in admins' CI. A suite:
//
//	apiVersion: cli.ipam.virtualization.deckhouse.io/v1alpha1
//	kind: PolicyTest
//	policies: [../policies/*.yaml]       # relative to the suite file; globs allowed
//	defaults:                            # an Input (JSON names of input.go) every case starts from
//	  network: {exists: true, ready: true, ipamEnabled: true}
//	cases:
//	- name: static address on the shared network is refused
//	  input:                             # a JSON merge patch over defaults (null removes)
//	    interface: {type: ClusterNetwork, name: shared, ipAddressName: web}
//	  expect: {skip: true, reason: StaticAddressNotAllowed, policy: tenant-networks,
//	           provenance: {allocation: default, skip: tenant-networks, hotplug: default}}
//
// A case no policy of the suite matches (only the built-in default decides) fails unless it
// expects `noPolicyMatched: true`; a passing case names the policy that decided.
//
// A case's input is applied over the defaults field by field: objects and maps merge, lists
// and scalars replace, null clears a map or list. Only the expectations given are checked.
// The shipped default policy is the built-in fallback, as in the controller.

// Suite file identification.
const (
	SuiteAPIVersion = "cli.ipam.virtualization.deckhouse.io/v1alpha1"
	SuiteKind       = "PolicyTest"
)

// TestSuite is one policy test file.
type TestSuite struct {
	// APIVersion must be SuiteAPIVersion.
	APIVersion string `json:"apiVersion"`
	// Kind must be SuiteKind.
	Kind string `json:"kind"`
	// Policies are files of ClusterIPAMPolicy documents, relative to the suite file, glob
	// patterns allowed. LoadSuite reads them into Loaded.
	Policies []string `json:"policies,omitempty"`
	// Defaults is the Input every case starts from.
	Defaults json.RawMessage `json:"defaults,omitempty"`
	// Cases are evaluated in order, each on its own.
	Cases []TestCase `json:"cases"`

	// Loaded are the policies the suite runs with; LoadSuite fills it from Policies, callers
	// of ParseSuite may fill it themselves.
	Loaded []SuitePolicy `json:"-"`
}

// SuitePolicy is a policy of a suite and the file it came from.
type SuitePolicy struct {
	// File is the policy's file, as a path in the suite's fs.FS.
	File string
	// Policy is the decoded policy.
	Policy v1alpha1.ClusterIPAMPolicy
}

// TestCase is one interface input and what its decision must be.
type TestCase struct {
	// Name identifies the case in results; required.
	Name string `json:"name"`
	// Input is applied over the suite's defaults.
	Input json.RawMessage `json:"input,omitempty"`
	// Expect is what the decision must be; at least one expectation is required.
	Expect Expectation `json:"expect"`
}

// Expectation is what a decision must be; absent fields are not checked.
type Expectation struct {
	Allocation *Allocation `json:"allocation,omitempty"` // Decision.Allocation
	Skip       *bool       `json:"skip,omitempty"`       // Decision.Skip
	Reason     *Reason     `json:"reason,omitempty"`     // Decision.Reason ("" for none)
	Rule       *string     `json:"rule,omitempty"`       // Decision.Rule
	// Policy is the deciding policy's name (BuiltinPolicy for the built-in default).
	Policy *string `json:"policy,omitempty"`
	// Hotplug is Decision.Hotplug.
	Hotplug *bool `json:"hotplug,omitempty"`
	// Provenance is which policy decided each part (Decision.Provenance); "" for none.
	Provenance *ProvenanceExpectation `json:"provenance,omitempty"`
	// MessageContains must be a substring of the decision's message.
	MessageContains string `json:"messageContains,omitempty"`
	// Audit maps an Audit-mode policy's name to what it must have recorded (an evaluation
	// error reads as a PolicyError skip with AllocationUnknown).
	Audit map[string]Expectation `json:"audit,omitempty"`
	// NoPolicyMatched: true when no policy of the suite may match the input (only the
	// built-in default decides), false when one must. When a suite has policies and none of
	// them matched a case, the case fails unless it expects this: a case that passes only
	// because the built-in default happens to agree tests nothing of the suite.
	NoPolicyMatched *bool `json:"noPolicyMatched,omitempty"`
}

// ProvenanceExpectation is what Decision.Provenance must be; absent fields are not checked.
type ProvenanceExpectation struct {
	Allocation *string `json:"allocation,omitempty"` // Provenance.Allocation
	Skip       *string `json:"skip,omitempty"`       // Provenance.Skip
	Hotplug    *string `json:"hotplug,omitempty"`    // Provenance.Hotplug
}

// CaseResult is the outcome of one case.
type CaseResult struct {
	// Name is the case's name.
	Name string
	// Decision is what the evaluator decided.
	Decision Decision
	// Diffs lists every expectation that did not hold, as "field: got X, want Y".
	Diffs []string
}

// Passed says whether every expectation held.
func (r CaseResult) Passed() bool { return len(r.Diffs) == 0 }

// String renders the result as "PASS name (decided by <policy>)" or "FAIL name" followed
// by one indented line per diff.
func (r CaseResult) String() string {
	if r.Passed() {
		return fmt.Sprintf("PASS %s (decided by %s)", r.Name, cmp.Or(r.Decision.Policy, "no policy"))
	}
	return "FAIL " + r.Name + "\n    " + strings.Join(r.Diffs, "\n    ")
}

// suiteMatched reports whether a policy other than the built-in default matched: d.Trace.Matched
// lists the matching policies, the built-in one as BuiltinPolicy.
//
// A failed evaluation's trace is cut short (an abandoned one has none): its failing policy,
// when it is the suite's, matched as well. Before, a case that hit the deadline under load was
// reported as "no policy of the suite matched (the built-in default decided)".
func suiteMatched(d Decision) bool {
	if d.Reason == ReasonPolicyError && d.Policy != "" && d.Policy != BuiltinPolicy {
		return true
	}
	return slices.ContainsFunc(d.Trace.Matched, func(p string) bool { return p != BuiltinPolicy })
}

// ParseSuite decodes a suite file strictly (an unknown field is an error) and checks that
// every case has a name, at least one expectation, allocations among Auto, Static and None,
// and an input that decodes over the defaults. A problem of a case names it, by index and
// name: cases[1] "static refused": unknown field "expect.skp". It does not read the policy
// files.
func ParseSuite(data []byte) (*TestSuite, error) {
	docs, err := manifest.Split(data) // a key given twice is an error, as in a policy
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		// A second document was dropped without a word (issue #15, a new user's try).
		return nil, fmt.Errorf("%d documents, want one suite per file", len(docs))
	}
	js := docs[0].JSON
	var file suiteFile
	if err := unmarshalStrict(js, &file); err != nil {
		return nil, err
	}
	if file.APIVersion != SuiteAPIVersion || file.Kind != SuiteKind {
		return nil, fmt.Errorf("apiVersion %q kind %q, want %s %s", file.APIVersion, file.Kind, SuiteAPIVersion, SuiteKind)
	}
	if len(file.Cases) == 0 {
		return nil, errors.New("no cases")
	}
	s := &TestSuite{APIVersion: file.APIVersion, Kind: file.Kind, Policies: file.Policies, Defaults: file.Defaults,
		Cases: make([]TestCase, len(file.Cases))}
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

// suiteFile is a TestSuite as written, its cases still to be decoded one by one.
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

func (s *TestSuite) checkCase(i int, c TestCase) error {
	switch {
	case c.Name == "":
		return fmt.Errorf("cases[%d]: a name is required", i)
	case c.Expect.empty():
		return fmt.Errorf("cases[%d] %q: expect is empty", i, c.Name)
	}
	if err := c.Expect.checkAllocations("expect"); err != nil {
		return fmt.Errorf("cases[%d] %q: %w", i, c.Name, err)
	}
	if _, err := s.CaseInput(i); err != nil {
		return fmt.Errorf("cases[%d] %q: %w", i, c.Name, err)
	}
	return nil
}

// checkAllocations reports an expected allocation other than Auto, Static and None ("" is
// AllocationUnknown, the allocation of a failed evaluation), at path.
func (e Expectation) checkAllocations(path string) error {
	if e.Allocation != nil {
		switch *e.Allocation {
		case AllocationAuto, AllocationStatic, AllocationNone, AllocationUnknown:
		default:
			return fmt.Errorf("%s.allocation: Unsupported value %q: supported values: %q, %q, %q (\"\" for a failed evaluation)",
				path, *e.Allocation, AllocationAuto, AllocationStatic, AllocationNone)
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

// CaseInput is the Input of case i: the suite's defaults with the case's input applied as a
// JSON merge patch (RFC 7386: objects and maps merge, lists and scalars are replaced, null
// removes), decoded case-sensitively with unknown and duplicate fields refused. Before, the
// input was decoded over the defaults by encoding/json, which matched field names in any case
// (`VM: {Labels: …}` was read as vm.labels) and left a string or number the defaults set
// when the case said null (issue #15, tester atk18).
func (s *TestSuite) CaseInput(i int) (Input, error) {
	merged := []byte("{}")
	for _, raw := range []json.RawMessage{s.Defaults, s.Cases[i].Input} {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var err error
		if merged, err = jsonpatch.MergePatch(merged, raw); err != nil {
			return Input{}, fmt.Errorf("input: %w", err)
		}
	}
	var in Input
	if err := unmarshalStrict(merged, &in); err != nil {
		return Input{}, fmt.Errorf("input: %w", err)
	}
	return in, nil
}

// PolicyDecoder reads the ClusterIPAMPolicy documents of one file (YAML or JSON, documents
// separated by "---"), as policies.Decode does; an error names the document and field.
type PolicyDecoder func(data []byte) ([]v1alpha1.ClusterIPAMPolicy, error)

// LoadSuite reads the suite file name from fsys, parses it and loads the policy files it
// names, resolved against the suite file's directory within fsys, with decode (nil:
// policies.Decode). `ipamctl test` passes the dry-run engine's decoder, which `ipamctl lint`
// and `ipamctl evaluate` use too, so that a file is read alike by every front end.
func LoadSuite(fsys fs.FS, name string, decode PolicyDecoder) (*TestSuite, error) {
	if decode == nil {
		decode = policies.Decode
	}
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	s, err := ParseSuite(data)
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

func loadPolicies(fsys fs.FS, pattern string, decode PolicyDecoder) ([]SuitePolicy, error) {
	files, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no such file", pattern)
	}
	var out []SuitePolicy
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
			out = append(out, SuitePolicy{File: f, Policy: p})
		}
	}
	return out, nil
}

// RunSuite compiles the suite's loaded policies as new ones (as the admission webhook
// would), with the shipped default as the built-in fallback, and decides every case with
// Options.Explain. It fails, naming file, policy and field paths, when a policy does not
// compile; failed expectations are in the results.
func RunSuite(ctx context.Context, c *Compiler, s *TestSuite) ([]CaseResult, error) {
	set, err := suiteSet(c, s.Loaded)
	if err != nil {
		return nil, err
	}
	results := make([]CaseResult, len(s.Cases))
	for i, tc := range s.Cases {
		results[i].Name = tc.Name
		in, err := s.CaseInput(i)
		if err != nil {
			results[i].Diffs = []string{err.Error()}
			continue
		}
		d := set.Decide(ctx, in, Options{Explain: true})
		results[i].Decision, results[i].Diffs = d, tc.Expect.diff(d)
		if inputRefused(d) {
			results[i].Diffs = append(results[i].Diffs, "the case's input is beyond the bounds policies are evaluated with: "+d.Message)
			continue
		}
		if d.Reason == ReasonPolicyError && len(results[i].Diffs) > 0 {
			// Say why the decision differs: the evaluation failed, under load maybe by the deadline.
			results[i].Diffs = append([]string{"the evaluation failed (" + string(ReasonPolicyError) + "): " + d.Message}, results[i].Diffs...)
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
// it reads (run.activation), whether that failed the interface or was passed over.
func inputRefused(d Decision) bool {
	return slices.ContainsFunc(append([]string{d.Message}, d.Trace.Errors...), func(e string) bool {
		return strings.HasPrefix(e, "policy ") && strings.Contains(e, ": "+inputPath+": beyond the bounds")
	})
}

func suiteSet(c *Compiler, loaded []SuitePolicy) (*Set, error) {
	var compiled []*Policy
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
	return NewSet(compiled, fallback), nil
}

package evaluator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"sigs.k8s.io/yaml"

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
//	  input:                             # applied over defaults
//	    interface: {type: ClusterNetwork, name: shared, ipAddressName: web}
//	  expect: {skip: true, reason: StaticAddressNotAllowed, policy: tenant-networks}
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
	// MessageContains must be a substring of the decision's message.
	MessageContains string `json:"messageContains,omitempty"`
	// Audit maps an Audit-mode policy's name to what it must have recorded (an evaluation
	// error reads as a PolicyError skip with AllocationUnknown).
	Audit map[string]Expectation `json:"audit,omitempty"`
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

// String renders the result as "PASS name" or "FAIL name" followed by one indented line
// per diff.
func (r CaseResult) String() string {
	if r.Passed() {
		return "PASS " + r.Name
	}
	return "FAIL " + r.Name + "\n    " + strings.Join(r.Diffs, "\n    ")
}

// ParseSuite decodes a suite file strictly (an unknown field is an error) and checks that
// every case has a name, at least one expectation and an input that decodes over the
// defaults. It does not read the policy files.
func ParseSuite(data []byte) (*TestSuite, error) {
	var s TestSuite
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, err
	}
	if s.APIVersion != SuiteAPIVersion || s.Kind != SuiteKind {
		return nil, fmt.Errorf("apiVersion %q kind %q, want %s %s", s.APIVersion, s.Kind, SuiteAPIVersion, SuiteKind)
	}
	if len(s.Cases) == 0 {
		return nil, errors.New("no cases")
	}
	for i, c := range s.Cases {
		if err := s.checkCase(i, c); err != nil {
			return nil, err
		}
	}
	return &s, nil
}

func (s *TestSuite) checkCase(i int, c TestCase) error {
	switch {
	case c.Name == "":
		return fmt.Errorf("cases[%d]: a name is required", i)
	case c.Expect.empty():
		return fmt.Errorf("cases[%d] %q: expect is empty", i, c.Name)
	}
	if _, err := s.CaseInput(i); err != nil {
		return fmt.Errorf("cases[%d] %q: %w", i, c.Name, err)
	}
	return nil
}

func (e Expectation) empty() bool {
	return e.Allocation == nil && e.Skip == nil && e.Reason == nil && e.Rule == nil && e.Policy == nil &&
		e.Hotplug == nil && e.MessageContains == "" && len(e.Audit) == 0
}

// CaseInput is the Input of case i: the suite's defaults with the case's input applied.
func (s *TestSuite) CaseInput(i int) (Input, error) {
	var in Input
	for _, raw := range []json.RawMessage{s.Defaults, s.Cases[i].Input} {
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return Input{}, fmt.Errorf("input: %w", err)
		}
	}
	return in, nil
}

// LoadSuite reads the suite file name from fsys, parses it and loads the policy files it
// names, resolved against the suite file's directory within fsys.
func LoadSuite(fsys fs.FS, name string) (*TestSuite, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	s, err := ParseSuite(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, pattern := range s.Policies {
		loaded, err := loadPolicies(fsys, path.Join(path.Dir(name), pattern))
		if err != nil {
			return nil, fmt.Errorf("%s: policies: %w", name, err)
		}
		s.Loaded = append(s.Loaded, loaded...)
	}
	return s, nil
}

func loadPolicies(fsys fs.FS, pattern string) ([]SuitePolicy, error) {
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
		docs, err := policies.Decode(data)
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
		results[i].Decision = set.Decide(ctx, in, Options{Explain: true})
		results[i].Diffs = tc.Expect.diff(results[i].Decision)
	}
	return results, nil
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

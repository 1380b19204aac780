package metrics_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/controller/plan"
)

// TestRunbookCoversEveryAlertAndReason: docs/RUNBOOK.md has a section for every alert of
// deploy/monitoring/alerts.yaml, whose runbook_url points at it, and for every skip reason —
// the evaluator's built-in ones (read from its source, so a new one cannot be forgotten) and
// the controller's own.
func TestRunbookCoversEveryAlertAndReason(t *testing.T) {
	runbook, err := os.ReadFile("../../docs/RUNBOOK.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]bool{}
	for _, line := range strings.Split(string(runbook), "\n") {
		if name, ok := strings.CutPrefix(line, "### "); ok {
			sections[name] = true
		}
	}
	data, err := os.ReadFile("../../deploy/monitoring/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if !sections[r.Alert] {
				t.Errorf("RUNBOOK.md has no section for alert %s", r.Alert)
			}
			if url := r.Annotations["runbook_url"]; !strings.HasSuffix(url, "docs/RUNBOOK.md#"+strings.ToLower(r.Alert)) {
				t.Errorf("alert %s: runbook_url %q does not point at its section", r.Alert, url)
			}
		}
	}
	for _, reason := range append(builtinReasons(t), plan.ReasonDuplicateInterface, plan.ReasonIPAddressConflict) {
		if !sections[reason] {
			t.Errorf("RUNBOOK.md has no section for skip reason %s", reason)
		}
	}
}

// builtinReasons are the values of the evaluator's constants of type Reason.
func builtinReasons(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../../evaluator/decision.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if typ, ok := spec.Type.(*ast.Ident); !ok || typ.Name != "Reason" {
			return true
		}
		for _, v := range spec.Values {
			if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, _ := strconv.Unquote(lit.Value)
				out = append(out, s)
			}
		}
		return true
	})
	if len(out) < 10 {
		t.Fatalf("found only %d Reason constants in evaluator/decision.go: %v", len(out), out)
	}
	return out
}

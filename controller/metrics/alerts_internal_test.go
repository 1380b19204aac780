package metrics

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/evaluator"
)

// monitoring is where the alert rules and their promtool tests live.
const monitoring = "../../deploy/monitoring/"

// TestAlertTestsUseTheSeriesTheGaugesProduce: the promtool tests of the alert rules feed
// vmipam_* series with exactly the names and label names this package exports, and the rules
// ask for nothing else, so that a renamed metric or label fails here instead of leaving an
// alert that can never fire.
func TestAlertTestsUseTheSeriesTheGaugesProduce(t *testing.T) {
	exported := exportedLabels(t)
	var tests struct {
		Tests []struct {
			InputSeries []struct {
				Series string `json:"series"`
			} `json:"input_series"`
		} `json:"tests"`
	}
	readYAML(t, monitoring+"alerts_test.yaml", &tests)
	series := regexp.MustCompile(`^(\w+)\{(.*)\}$`)
	used := 0
	for _, tc := range tests.Tests {
		for _, in := range tc.InputSeries {
			m := series.FindStringSubmatch(in.Series)
			if m == nil {
				t.Errorf("input series %q is not name{labels}", in.Series)
				continue
			}
			if regexp.MustCompile(`^vmipam_`).MatchString(m[1]) {
				used++
				checkLabels(t, exported, m[1], m[2], "input series "+in.Series)
			}
		}
	}
	if used == 0 {
		t.Fatal("the alert tests feed no vmipam_* series")
	}

	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	readYAML(t, monitoring+"alerts.yaml", &rules)
	selector := regexp.MustCompile(`(vmipam_\w+)(?:\{([^}]*)\})?`)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, m := range selector.FindAllStringSubmatch(r.Expr, -1) {
				checkLabels(t, exported, m[1], m[2], "alert "+r.Alert)
			}
		}
	}
}

// checkLabels reports when name is not exported or labels (`a="b",c=~"d"`) name a label it
// does not have; job and instance are the scrape's.
func checkLabels(t *testing.T, exported map[string][]string, name, labels, where string) {
	t.Helper()
	have, ok := exported[name]
	if !ok {
		t.Errorf("%s: %s is not a metric vmipam exports", where, name)
		return
	}
	for _, l := range regexp.MustCompile(`(\w+)\s*[=!~]+\s*"`).FindAllStringSubmatch(labels, -1) {
		if l[1] != "job" && l[1] != "instance" && !slices.Contains(have, l[1]) {
			t.Errorf("%s: %s has no label %q (it has %v)", where, name, l[1], have)
		}
	}
}

// exportedLabels gathers every vmipam metric, each with at least one series, and returns its
// label names by metric name.
func exportedLabels(t *testing.T) map[string][]string {
	t.Helper()
	state := NewState()
	state.SetVM(types.NamespacedName{Namespace: "demo", Name: "web"}, []Interface{
		InterfaceFor("PoolExhausted", "Auto", Network{Kind: "Network", Namespace: "demo", Name: "lab"})})
	state.SetPolicy("default", true, false)
	cert, _, err := certutil.GenerateSelfSignedCertKey("vmipam", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile := filepath.Join(t.TempDir(), "tls.crt")
	if err := os.WriteFile(certFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	WatchCertificate("webhook", certFile)
	defer WatchCertificate("webhook", "")
	Request(504)
	Controller.Decided(evaluator.Decision{Reason: evaluator.ReasonPolicyError, Policy: "strict"})

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(state, NewRecordObservation(nil), buildInfo, servingCertificates, dryRunRequests, abandonedEvaluations,
		policyEvaluationErrors)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, f := range families {
		out[f.GetName()] = labelNames(f.GetMetric()[0])
	}
	return out
}

func labelNames(m *dto.Metric) []string {
	var names []string
	for _, l := range m.GetLabel() {
		names = append(names, l.GetName())
	}
	return names
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

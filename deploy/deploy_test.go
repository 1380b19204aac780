package deploy_test

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/controller/webhook"
	"github.com/vmipam/vmipam/deploy"
)

// valueSets are the value combinations the chart supports; each must lint and render.
var valueSets = map[string]map[string]any{
	"defaults": nil,
	"monitoring": {"monitoring": map[string]any{
		"prometheusRule": map[string]any{"enabled": true}, "serviceMonitor": map[string]any{"enabled": true, "interval": "15s"}}},
	"cert-manager, API, network policies": {
		"certificates":  map[string]any{"mode": "cert-manager"},
		"apiService":    map[string]any{"enabled": true},
		"networkPolicy": map[string]any{"enabled": true, "apiServerCIDRs": []any{"10.0.0.1/32"}},
	},
	"cert-manager with an issuer, hard anti-affinity, priority, tolerations": {
		"certificates": map[string]any{"mode": "cert-manager",
			"certManager": map[string]any{"issuerRef": map[string]any{"name": "corp-ca", "kind": "ClusterIssuer"}}},
		"podAntiAffinity":   "hard",
		"priorityClassName": "system-cluster-critical",
		"tolerations":       []any{map[string]any{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}},
		"image":             map[string]any{"repository": "registry.example/vmipam", "digest": "sha256:" + strings.Repeat("a", 64)},
	},
}

// TestLint is `helm lint --strict` over the chart with each value set, through Helm's SDK.
func TestLint(t *testing.T) {
	kv, err := chartutil.ParseKubeVersion(deploy.KubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			linter := lint.AllWithKubeVersion(deploy.ChartDir, values, "vmipam-system", kv)
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev { // --strict: warnings fail too
					t.Errorf("helm lint: %s", m)
				}
			}
		})
	}
}

// render returns the objects of `helm template vmipam` with values, by kind and name.
func render(t *testing.T, values map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	list, err := deploy.Objects("vmipam", "vmipam-system", values)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]*unstructured.Unstructured{}
	for _, u := range list {
		objs[u.GetKind()+"/"+u.GetName()] = u
	}
	return objs
}

func TestTemplateRendersEveryValueSet(t *testing.T) {
	for name, values := range valueSets {
		t.Run(name, func(t *testing.T) {
			objs := render(t, values)
			for _, want := range []string{"Deployment/vmipam", "ServiceAccount/vmipam", "ClusterRole/vmipam-controller",
				"Role/vmipam-controller", "ValidatingWebhookConfiguration/vmipam-clusteripampolicy",
				"CustomResourceDefinition/clusteripampolicies.ipam.virtualization.deckhouse.io"} {
				if objs[want] == nil {
					t.Errorf("%s not rendered", want)
				}
			}
		})
	}
}

// TestWebhookConfigurationIsTheControllers pins that the chart's webhook configuration is
// controller/webhook.Configuration with only the Service and name filled in.
func TestWebhookConfigurationIsTheControllers(t *testing.T) {
	got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	fromUnstructured(t, render(t, nil)["ValidatingWebhookConfiguration/vmipam-clusteripampolicy"], got)
	want := webhook.Configuration(webhook.ServiceClientConfig("vmipam-system", "vmipam-webhook", 9443, nil))
	want.Name, want.Labels, got.Labels = got.Name, nil, nil
	if !equality.Semantic.DeepEqual(got, want) {
		g, _ := yaml.Marshal(got)
		w, _ := yaml.Marshal(want)
		t.Errorf("rendered webhook configuration\n%s\nwant\n%s", g, w)
	}
}

func TestValuesSchemaRefusesMistakes(t *testing.T) {
	for name, values := range map[string]map[string]any{
		"unknown value":          {"replica": 3},
		"certificate mode":       {"certificates": map[string]any{"mode": "vault"}},
		"anti-affinity":          {"podAntiAffinity": "always"},
		"port out of range":      {"ports": map[string]any{"webhook": 70000}},
		"digest without sha256:": {"image": map[string]any{"repository": "r", "digest": "abc"}},
		"no dry-run seat":        {"dryRun": map[string]any{"maxInFlight": 0}},
		"unknown dry-run value":  {"dryRun": map[string]any{"maxRequestBytes": 1 << 20}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := deploy.Template("vmipam", "vmipam-system", values); err == nil ||
				!strings.Contains(err.Error(), "values don't meet the specifications of the schema") {
				t.Errorf("Template(%v) = %v, want a schema error", values, err)
			}
		})
	}
}

// TestDeploymentIsRestricted pins the restricted Pod Security profile and the probes.
func TestDeploymentIsRestricted(t *testing.T) {
	d := &appsv1.Deployment{}
	fromUnstructured(t, render(t, nil)["Deployment/vmipam"], d)
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	sc := c.SecurityContext
	switch {
	case *d.Spec.Replicas != 2:
		t.Errorf("replicas %d, want 2", *d.Spec.Replicas)
	case pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot || *pod.SecurityContext.RunAsUser != 65532:
		t.Errorf("pod securityContext %+v, want non-root 65532", pod.SecurityContext)
	case pod.SecurityContext.SeccompProfile == nil || pod.SecurityContext.SeccompProfile.Type != "RuntimeDefault":
		t.Errorf("seccompProfile %+v, want RuntimeDefault", pod.SecurityContext.SeccompProfile)
	case sc == nil || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
		t.Errorf("container securityContext %+v, want no escalation, read-only root, drop ALL", sc)
	case c.ReadinessProbe == nil || c.LivenessProbe == nil || c.StartupProbe == nil:
		t.Errorf("probes: readiness %v, liveness %v, startup %v", c.ReadinessProbe, c.LivenessProbe, c.StartupProbe)
	case c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero():
		t.Errorf("resources %+v, want memory requests and limits", c.Resources)
	case pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil:
		t.Errorf("no pod anti-affinity")
	}
}

func fromUnstructured(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if u == nil {
		t.Fatal("object not rendered")
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatal(err)
	}
}

func TestCallerRolesShipWithTheChart(t *testing.T) {
	objs := render(t, nil)
	for _, name := range []string{"vmipam:dryrun:evaluator", "vmipam:dryrun:policy-evaluator", "vmipam-metrics-reader"} {
		role, ok := objs["ClusterRole/"+name]
		if !ok {
			t.Errorf("the chart has no ClusterRole %s", name)
			continue
		}
		if role.GetLabels()["app.kubernetes.io/name"] == "" {
			t.Errorf("ClusterRole %s lacks the chart's labels: %v", name, role.GetLabels())
		}
	}
	if got := render(t, map[string]any{"callerRoles": false}); got["ClusterRole/vmipam:dryrun:evaluator"] != nil {
		t.Error("callerRoles: false still renders the evaluator role")
	}
	if agg := objs["ClusterRole/vmipam:dryrun:evaluator"]; agg != nil && agg.GetLabels()["rbac.authorization.k8s.io/aggregate-to-edit"] != "true" {
		t.Errorf("the evaluator role no longer aggregates into edit: %v", agg.GetLabels())
	}
}

func TestMonitoringObjectsCarryTheTestedAlerts(t *testing.T) {
	if objs := render(t, nil); objs["PrometheusRule/vmipam"] != nil || objs["ServiceMonitor/vmipam"] != nil {
		t.Fatal("monitoring objects rendered by default (they need the Prometheus Operator's CRDs)")
	}
	objs := render(t, map[string]any{"monitoring": map[string]any{
		"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
		"serviceMonitor": map[string]any{"enabled": true}}})
	rule := objs["PrometheusRule/vmipam"]
	if rule == nil {
		t.Fatal("no PrometheusRule")
	}
	if rule.GetLabels()["release"] != "prom" {
		t.Errorf("PrometheusRule labels %v lack the value's", rule.GetLabels())
	}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	alerts := 0
	for _, g := range groups {
		rules, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rules {
			r := r.(map[string]any)
			if r["alert"] == nil {
				continue
			}
			alerts++
			if url, _, _ := unstructured.NestedString(r, "annotations", "runbook_url"); url == "" {
				t.Errorf("alert %v has no runbook_url", r["alert"])
			}
		}
	}
	if alerts < 10 {
		t.Errorf("the PrometheusRule has %d alerts; deploy/monitoring/alerts.yaml has more", alerts)
	}
	sm := objs["ServiceMonitor/vmipam"]
	if sm == nil {
		t.Fatal("no ServiceMonitor")
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) != 1 || eps[0].(map[string]any)["scheme"] != "https" || eps[0].(map[string]any)["port"] != "metrics" {
		t.Errorf("ServiceMonitor endpoints %v: want one https endpoint on port metrics", eps)
	}
}

func TestAPDBThatBlocksEveryDrainIsRefused(t *testing.T) {
	for _, values := range []map[string]any{
		{"replicas": 1},
		{"podDisruptionBudget": map[string]any{"enabled": true, "minAvailable": 2}},
	} {
		if _, err := deploy.Objects("vmipam", "vmipam-system", values); err == nil || !strings.Contains(err.Error(), "must be below replicas") {
			t.Errorf("values %v: err = %v, want the chart to refuse a PDB no drain can satisfy", values, err)
		}
	}
	if _, err := deploy.Objects("vmipam", "vmipam-system", map[string]any{"replicas": 1, "podDisruptionBudget": map[string]any{"enabled": false}}); err != nil {
		t.Errorf("one replica without a PDB: %v", err)
	}
}

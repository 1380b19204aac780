package monitoring

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/test/build"
)

const (
	timeout  = 45 * time.Second // longer than the metrics filter's 30 s cache of a denial
	interval = 200 * time.Millisecond
)

var _ = Describe("The secure metrics endpoint", Ordered, func() {
	ctx := context.Background()
	var ns, readerToken, otherToken string

	BeforeAll(func() {
		ns = "monitoring"
		Expect(k8s.Create(ctx, build.Namespace(ns))).To(Succeed())
		role := readClusterRole("../../deploy/monitoring/metrics-reader.yaml")
		Expect(k8s.Create(ctx, role)).To(Succeed())
		for _, sa := range []string{"prometheus", "stranger"} {
			Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}})).To(Succeed())
		}
		Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "prometheus"}}})).To(Succeed())
		readerToken, otherToken = token(ctx, ns, "prometheus"), token(ctx, ns, "stranger")
	})

	It("answers a ServiceAccount bound to metrics-reader (200) and no other caller (403, 401)", func() {
		Eventually(func() int { code, _ := scrape(readerToken); return code }, timeout, interval).Should(Equal(http.StatusOK))
		code, families := scrape(readerToken)
		Expect(code).To(Equal(http.StatusOK))
		Expect(families).To(HaveKey("vmipam_build_info"))
		code, _ = scrape(otherToken)
		Expect(code).To(Equal(http.StatusForbidden))
		code, _ = scrape("")
		Expect(code).To(Equal(http.StatusUnauthorized))
	})

	It("counts skipped interfaces as the VMs are, and stops counting one once it is fixed", func() {
		corp := "monitoring-corp"
		Expect(k8s.Create(ctx, build.ClusterPool(corp+"-pool", "10.20.0.0/24"))).To(Succeed())
		Expect(k8s.Create(ctx, build.ClusterNetwork(corp, corp+"-pool"))).To(Succeed())
		for i := range 3 {
			Expect(k8s.Create(ctx, build.VM(ns, fmt.Sprintf("vm-%d", i), build.OnClusterNetwork(corp, fmt.Sprintf("ip-%d", i))))).To(Succeed())
		}
		notFound := map[string]string{"state": "skipped", "reason": "IPAddressNotFound", "mode": "Static"}
		attached := map[string]string{"state": "attached", "reason": "", "mode": "Static"}
		Eventually(func() float64 { return gauge(readerToken, "vmipam_interfaces", notFound) }, timeout, interval).Should(Equal(3.0))
		Expect(gauge(readerToken, "vmipam_interfaces", attached)).To(BeZero())

		By("creating the IPAddress of vm-0")
		Expect(k8s.Create(ctx, build.StaticIPAddress(ns, "ip-0", "ClusterNetwork", corp, "10.20.0.10"))).To(Succeed())
		Eventually(func() float64 { return gauge(readerToken, "vmipam_interfaces", notFound) }, timeout, interval).Should(Equal(2.0))
		Eventually(func() float64 { return gauge(readerToken, "vmipam_interfaces", attached) }, timeout, interval).Should(Equal(1.0))

		By("deleting vm-1: its interface is not counted any more")
		Expect(k8s.Delete(ctx, build.VM(ns, "vm-1"))).To(Succeed())
		Eventually(func() float64 { return gauge(readerToken, "vmipam_interfaces", notFound) }, timeout, interval).Should(Equal(1.0))
	})

	It("names the network whose pool is exhausted", func() {
		small := "monitoring-small"
		Expect(k8s.Create(ctx, build.ClusterPool(small+"-pool", "10.30.0.0/24", "10.30.0.10-10.30.0.10"))).To(Succeed())
		Expect(k8s.Create(ctx, build.ClusterNetwork(small, small+"-pool"))).To(Succeed())
		for _, name := range []string{"first", "second"} {
			Expect(k8s.Create(ctx, build.VM(ns, name, build.OnClusterNetwork(small, "")))).To(Succeed())
		}
		exhausted := map[string]string{"network_kind": "ClusterNetwork", "network_namespace": "", "network": small}
		Eventually(func() float64 { return gauge(readerToken, "vmipam_pool_exhausted_interfaces", exhausted) }, timeout, interval).Should(Equal(1.0))
		Expect(gauge(readerToken, "vmipam_interfaces", map[string]string{"state": "pending", "reason": "PoolExhausted", "mode": "Auto"})).To(Equal(1.0))
		Expect(gauge(readerToken, "vmipam_interfaces", map[string]string{"state": "attached", "reason": "", "mode": "Auto"})).To(Equal(1.0))
	})

	It("says the installed default policy is ready and serves its current generation", func() {
		Eventually(func() float64 {
			return gauge(readerToken, "vmipam_policy_ready", map[string]string{"policy": "default"})
		},
			timeout, interval).Should(Equal(1.0))
		Expect(gauge(readerToken, "vmipam_policy_serving_stale", map[string]string{"policy": "default"})).To(BeZero())
	})
})

// readClusterRole reads a ClusterRole manifest of deploy/.
func readClusterRole(path string) *rbacv1.ClusterRole {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	Expect(yaml.UnmarshalStrict(data, role)).To(Succeed())
	return role
}

// token is a fresh token of the ServiceAccount, as a pod would mount it.
func token(ctx context.Context, ns, sa string) string {
	GinkgoHelper()
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// scraper trusts any certificate: the endpoint serves a generated self-signed one, as a
// ServiceMonitor with insecureSkipVerify would (the chart can mount a real one).
var scraper = &http.Client{Timeout: 10 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed test endpoint

// scrape GETs the metrics endpoint with a bearer token ("" sends none) and returns the status
// code and, on 200, the parsed metric families.
func scrape(bearer string) (int, map[string]*dto.MetricFamily) {
	GinkgoHelper()
	req, err := http.NewRequest(http.MethodGet, metricsURL, nil)
	Expect(err).NotTo(HaveOccurred())
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := scraper.Do(req)
	if err != nil {
		return 0, nil // not listening yet
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, families
}

// gauge scrapes and returns the value of the gauge series of name with exactly labels, 0
// when there is none.
func gauge(bearer, name string, labels map[string]string) float64 {
	GinkgoHelper()
	code, families := scrape(bearer)
	Expect(code).To(Equal(http.StatusOK))
	for _, m := range families[name].GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if equalLabels(got, labels) {
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// equalLabels compares label sets; an empty value equals an absent label, as in Prometheus.
func equalLabels(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok && v != "" {
			return false
		}
	}
	return true
}

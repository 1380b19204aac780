package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	"github.com/vmipam/vmipam/cmd/ipamctl/cli"
	"github.com/vmipam/vmipam/controller"
	"github.com/vmipam/vmipam/controller/dryrun"
	"github.com/vmipam/vmipam/controller/dryrun/endpoint"
	"github.com/vmipam/vmipam/crds/rbac"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/test/build"
)

// The dry-run endpoint, served by the production wiring (controller.Setup and
// controller.SetupDryRun on one manager) in place of the suite's vmipam manager, called with
// real ServiceAccount tokens (TokenRequest) that the API server reviews. Every request the
// manager sends to the API server passes through drCounter, so "never writes" is measured,
// not assumed: while the controller has nothing to do, dry runs whose answers are full of
// writes leave the write count and every resourceVersion unchanged; the only requests that
// are not reads are the TokenReviews and SubjectAccessReviews the endpoint asks for.
var _ = Describe("Dry-run endpoint", Ordered, func() {
	var (
		ctx                      context.Context
		srv                      *endpoint.Server
		counter                  *drCounter
		ns, network              string
		vmUser, author, stranger string
		httpClient               *http.Client
		answer                   func(token, body string) (int, []byte)
	)

	BeforeAll(func() {
		ctx = context.Background()
		counter = &drCounter{}
		stopVMIPAM()
		srv = startDryRunVMIPAM(counter)
		DeferCleanup(func() {
			stopVMIPAM()
			startVMIPAM()
		})
		Eventually(func() error { return srv.ReadyCheck(nil) }, timeout, interval).Should(Succeed())
		httpClient = drHTTPClient(srv.ServingCertPEM())
		answer = func(token, body string) (int, []byte) { return drPost(httpClient, srv, token, strings.NewReader(body)) }

		drInstallRoles(ctx)
		ns = newNamespace(ctx)
		vmUser = drServiceAccount(ctx, ns, "vm-user", rbac.ClusterRoleVirtualMachines)
		author = drServiceAccount(ctx, ns, "author", rbac.ClusterRoleVirtualMachines, rbac.ClusterRolePolicies)
		stranger = drServiceAccount(ctx, ns, "stranger")

		network = pooledClusterNetwork(ctx, ns, "10.231.0.0/24")
		create(ctx, build.VM(ns, "web", build.OnClusterNetwork(network, "")))
		Eventually(func() string { return statusAddress(ctx, ns, "web", vmv1.NetworkTypeClusterNetwork, network) },
			timeout, interval).ShouldNot(BeEmpty())
	})

	It("answers a ServiceAccount with the shipped RBAC, as the controller decided and as a change would go, and never writes", func() {
		rvs := drSettled(ctx, counter, ns, network)
		writes, reviews := counter.writesFor(ns), counter.reviews()
		Expect(writes).To(ContainElement(ContainSubstring("/ipaddresses")), "the counter sees the controller's writes")

		By("the live VM: what the controller did, nothing left to do")
		live := getVM(ctx, ns, "web")
		res := drResult(answer(vmUser, drBody(live)))
		Expect(res.VM).To(Equal(dryrun.VMSummary{Namespace: ns, Name: "web", UID: string(live.UID), Exists: true}))
		Expect(res.Interfaces).To(HaveLen(1))
		Expect(res.Interfaces[0]).To(And(HaveField("Attached", true),
			HaveField("Address", statusAddress(ctx, ns, "web", vmv1.NetworkTypeClusterNetwork, network)),
			HaveField("Decision.Allocation", evaluator.AllocationAuto), HaveField("Decision.Policy", "default")))
		Expect(res.Actions.CreateIPAddresses).To(BeEmpty())
		Expect(res.Actions.DeleteIPAddresses).To(BeEmpty())
		Expect(res.Actions.VMNetworksSpec.Changed).To(BeFalse())
		Expect(res.Status.Changed).To(BeFalse())
		Expect(res.Status.Conditions[0].Message).To(Equal(networkReady(ctx, ns, "web").Message))

		By("a second interface on a Network that exists only in the request")
		changed := live.DeepCopy()
		changed.Spec.Networks = append(changed.Spec.Networks, vmv1.NetworksSpec{Type: vmv1.NetworkTypeNetwork, Name: "lan"})
		lan := build.Network("", "lan", "lan-pool")
		lan.Status.Conditions = []metav1.Condition{{Type: sdnv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready",
			LastTransitionTime: metav1.Now()}}
		res = drResult(answer(vmUser, drBody(changed, drTyped(lan, "Network"), drTyped(build.Pool("", "lan-pool", "10.232.0.0/24"), "IPAddressPool"))))
		Expect(res.Interfaces[1]).To(And(HaveField("Decision.Allocation", evaluator.AllocationAuto),
			HaveField("Reason", string(evaluator.ReasonIPAddressPending))))
		Expect(res.Actions.CreateIPAddresses).To(ConsistOf(HaveField("Spec.NetworkRef.Name", "lan")))

		By("the objects lived for that request only")
		res = drResult(answer(vmUser, drBody(changed)))
		Expect(res.Interfaces[1].Reason).To(Equal(string(evaluator.ReasonNetworkNotFound)))

		By("a VM that does not exist, and candidate policies in place of the installed ones")
		fresh := build.VM(ns, "fresh", build.OnClusterNetwork(network, "fresh-ip"))
		res = drResult(answer(vmUser, drBody(fresh)))
		Expect(res.VM.Exists).To(BeFalse())
		Expect(res.Interfaces[0].Reason).To(Equal(string(evaluator.ReasonIPAddressNotFound)))
		res = drResult(answer(author, drBodyWithPolicies(fresh, drHoldPolicy)))
		Expect(res.Interfaces[0].Decision).To(And(HaveField("Policy", "hold-all"), HaveField("Reason", evaluator.Reason("HeldByCandidate"))))

		By("nothing was written")
		Consistently(func() []string { return counter.writesFor(ns) }, 2*time.Second, interval).Should(Equal(writes),
			"requests other than reads and reviews")
		Expect(counter.reviews()).To(BeNumerically(">", reviews), "callers were reviewed by the API server")
		Expect(drResourceVersions(ctx, ns, network)).To(Equal(rvs))
	})

	It("refuses a request without a token with 401", func() {
		code, data := answer("", drBody(getVM(ctx, ns, "web")))
		Expect(code).To(Equal(http.StatusUnauthorized))
		Expect(drStatus(data)).To(HaveField("Reason", metav1.StatusReasonUnauthorized))
	})

	It("refuses a token without the RBAC with 403, and candidate policies without theirs", func() {
		code, data := answer(stranger, drBody(getVM(ctx, ns, "web")))
		Expect(code).To(Equal(http.StatusForbidden))
		Expect(drStatus(data).Message).To(ContainSubstring(
			`User "system:serviceaccount:%s:stranger" cannot create resource "virtualmachines" in API group "virtualization.deckhouse.io" in the namespace %q`, ns, ns))

		code, data = answer(vmUser, drBodyWithPolicies(getVM(ctx, ns, "web"), drHoldPolicy))
		Expect(code).To(Equal(http.StatusForbidden))
		Expect(drStatus(data).Message).To(ContainSubstring(`cannot create resource "clusteripampolicies"`))
	})

	It("refuses a 10 MiB body with 413", func() {
		body := drBody(getVM(ctx, ns, "web")) + strings.Repeat(" ", 10<<20)
		code, data := drPost(httpClient, srv, vmUser, strings.NewReader(body), "Expect", "100-continue")
		Expect(code).To(Equal(http.StatusRequestEntityTooLarge))
		Expect(drStatus(data).Message).To(ContainSubstring("larger than the limit of %d bytes", dryrun.MaxBodyBytes))
	})

	It("answers malformed input with 400 naming the place", func() {
		compileErrors := drMetric("vmipam_policy_compile_errors_total", "source", "dryrun")
		for _, tc := range []struct{ body, field, message string }{
			{"vm:\n  metadata: {name: web\n  spec: [", "body", "yaml: line"},
			{drBodyWithPolicies(getVM(ctx, ns, "web"), strings.Replace(drHoldPolicy, `"true"`, `"ipAdress.exists"`, 1)),
				"policies[0].spec.skipRules[0].expression", "undeclared reference to 'ipAdress'"},
		} {
			code, data := answer(author, tc.body)
			Expect(code).To(Equal(http.StatusBadRequest), "%s", data)
			st := drStatus(data)
			Expect(st.Details.Causes).To(ContainElement(And(HaveField("Field", tc.field), HaveField("Message", ContainSubstring(tc.message)))))
			Expect(st.Message).To(ContainSubstring(tc.field))
		}
		Expect(drMetric("vmipam_policy_compile_errors_total", "source", "dryrun")-compileErrors).To(Equal(1.0),
			"the candidate policy that did not compile is counted")
	})

	It("serves `ipamctl dry-run` with a kubeconfig holding a ServiceAccount token and --server", func() {
		dir := GinkgoT().TempDir()
		ca, vmFile := filepath.Join(dir, "dryrun-ca.crt"), filepath.Join(dir, "vm.yaml")
		Expect(os.WriteFile(ca, srv.ServingCertPEM(), 0o600)).To(Succeed())
		vm := build.VM("", "web", build.OnClusterNetwork(network, ""))
		vm.APIVersion, vm.Kind = vmv1.GroupVersion.String(), "VirtualMachine"
		data, err := yaml.Marshal(vm)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(vmFile, data, 0o600)).To(Succeed())
		var out, errOut bytes.Buffer
		code := cli.Main(ctx, "kubectl-ipam", []string{"dry-run", "-f", vmFile, "--kubeconfig", testEnv.Kubeconfig,
			"--server", "https://" + srv.Addr(), "--certificate-authority", ca, "--token", vmUser, "-n", ns},
			cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		Expect(code).To(Equal(0), errOut.String())
		Expect(out.String()).To(And(ContainSubstring("VirtualMachine %s/web (exists)", ns),
			MatchRegexp(`ClusterNetwork/%s\s+Auto\s+yes`, network)))
	})

	It("accepts the client certificate of the admin kubeconfig, with --dry-run-client-ca-file", func() {
		dir := GinkgoT().TempDir()
		ca, vmFile := filepath.Join(dir, "dryrun-ca.crt"), filepath.Join(dir, "vm.json")
		Expect(os.WriteFile(ca, srv.ServingCertPEM(), 0o600)).To(Succeed())
		Expect(os.WriteFile(vmFile, []byte(drJSON(drManifest(getVM(ctx, ns, "web")))), 0o600)).To(Succeed())
		var out, errOut bytes.Buffer
		code := cli.Main(ctx, "ipamctl", []string{"dry-run", "-f", vmFile, "--kubeconfig", testEnv.Kubeconfig,
			"--server", "https://" + srv.Addr(), "--certificate-authority", ca, "-o", "json"},
			cli.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		Expect(code).To(Equal(0), errOut.String())
		res := &dryrun.Result{}
		Expect(json.Unmarshal(out.Bytes(), res)).To(Succeed())
		Expect(res.VM.Exists).To(BeTrue())
	})

	It("is ready and counts its answers", func() {
		Expect(srv.ReadyCheck(nil)).To(Succeed())
		Expect(drMetric("vmipam_dryrun_requests_total", "code", "200")).To(BeNumerically(">", 0))
		Expect(drMetric("vmipam_dryrun_requests_total", "code", "403")).To(BeNumerically(">", 0))
		Expect(drMetric("vmipam_decisions_total", "source", "dryrun")).To(BeNumerically(">", 0))
	})
})

// drHoldPolicy is a candidate policy that skips every interface.
const drHoldPolicy = `{"apiVersion": "ipam.virtualization.deckhouse.io/v1alpha1", "kind": "ClusterIPAMPolicy",
 "metadata": {"name": "hold-all"}, "spec": {"priority": 1, "allocation": {"expression": "'Auto'"},
 "skipRules": [{"name": "hold", "expression": "true", "reason": "HeldByCandidate", "message": "held"}]}}`

// startDryRunVMIPAM starts the production wiring with the dry-run endpoint on a free local
// port, every API request of the manager passing through counter, as the suite's vmipam
// manager (stopVMIPAM stops it).
func startDryRunVMIPAM(counter *drCounter) *endpoint.Server {
	GinkgoHelper()
	cfg := rest.CopyConfig(testEnv.Config)
	cfg.Wrap(counter.wrap)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Cache: controller.CacheOptions(),
		Metrics: metricsserver.Options{BindAddress: "0"}, Controller: config.Controller{SkipNameValidation: ptrTrue()}})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	registry, err := controller.Setup(ctx, mgr, evaluator.DefaultLimits)
	Expect(err).NotTo(HaveOccurred())
	clientCA := filepath.Join(testEnv.Env.ControlPlane.GetAPIServer().CertDir, "client-cert-auth-ca.crt")
	srv, err := controller.SetupDryRun(mgr, registry, endpoint.Options{BindAddress: "127.0.0.1:0", DenyCacheTTL: time.Second,
		ClientCAFile: clientCA})
	Expect(err).NotTo(HaveOccurred())
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(r.done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	mgrMu.Lock()
	vmipamMgr = r
	mgrMu.Unlock()
	return srv
}

// drCounter counts the requests a manager sends to the API server: reads (GET, including
// lists and watches), reviews (TokenReview and SubjectAccessReview creates, which store
// nothing) and writes (everything else).
type drCounter struct {
	mu        sync.Mutex
	written   []string
	reviewed  int
	lastWrite time.Time
}

func (c *drCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return drRoundTripper(func(r *http.Request) (*http.Response, error) {
		c.record(r)
		return rt.RoundTrip(r)
	})
}

func (c *drCounter) record(r *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, "/tokenreviews") || strings.HasSuffix(r.URL.Path, "/subjectaccessreviews")) {
		c.reviewed++
		return
	}
	c.written = append(c.written, r.Method+" "+r.URL.Path)
	c.lastWrite = time.Now()
}

// writesFor returns the writes so far that a dry run about a VM in ns could have made: in ns,
// or to cluster-scoped objects. Other namespaces are left out: specs that ran before share the
// API server, and their cleanup (namespace deletion, policy deletion) keeps the manager busy
// there for a while.
func (c *drCounter) writesFor(ns string) []string {
	var out []string
	for _, w := range c.writes() {
		if strings.Contains(w, "/namespaces/"+ns+"/") || !strings.Contains(w, "/namespaces/") {
			out = append(out, w)
		}
	}
	return out
}

// writes returns the writes so far.
func (c *drCounter) writes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.written...)
}

func (c *drCounter) reviews() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reviewed
}

// quiet reports whether the manager has not written for two seconds.
func (c *drCounter) quiet() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Since(c.lastWrite) > 2*time.Second
}

type drRoundTripper func(*http.Request) (*http.Response, error)

func (f drRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// drSettled waits until neither the manager nor anything else changes the objects the
// controller deals with, and returns their resourceVersions.
func drSettled(ctx context.Context, counter *drCounter, ns, network string) map[string]string {
	GinkgoHelper()
	var rvs map[string]string
	Eventually(func() bool {
		before := drResourceVersions(ctx, ns, network)
		time.Sleep(1500 * time.Millisecond)
		rvs = drResourceVersions(ctx, ns, network)
		return counter.quiet() && equalMaps(before, rvs)
	}, timeout, interval).Should(BeTrue(), "the controller and the stand-ins settle")
	return rvs
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// drResourceVersions returns the resourceVersion of every object of the namespace the
// controller reads or writes, of the namespace itself and of the ClusterNetwork.
func drResourceVersions(ctx context.Context, ns, network string) map[string]string {
	GinkgoHelper()
	out := map[string]string{}
	lists := map[string]client.ObjectList{"VirtualMachine": &vmv1.VirtualMachineList{}, "IPAddress": &sdnv1.IPAddressList{},
		"Pod": &corev1.PodList{}, "Network": &sdnv1.NetworkList{}, "Event": &corev1.EventList{}}
	for kind, list := range lists {
		Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		Expect(meta.EachListItem(list, func(o runtime.Object) error {
			m, err := meta.Accessor(o)
			if err == nil {
				out[kind+"/"+m.GetName()] = m.GetResourceVersion()
			}
			return err
		})).To(Succeed())
	}
	for key, obj := range map[string]client.Object{"Namespace/" + ns: &corev1.Namespace{}, "ClusterNetwork/" + network: &sdnv1.ClusterNetwork{}} {
		Expect(k8s.Get(ctx, client.ObjectKey{Name: strings.SplitN(key, "/", 2)[1]}, obj)).To(Succeed())
		out[key] = obj.GetResourceVersion()
	}
	return out
}

// drInstallRoles creates the shipped ClusterRoles (once per suite).
func drInstallRoles(ctx context.Context) {
	GinkgoHelper()
	roles, err := rbac.ClusterRoles()
	Expect(err).NotTo(HaveOccurred())
	for _, r := range roles {
		if err := k8s.Create(ctx, r); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	}
}

// drServiceAccount creates a ServiceAccount bound to the ClusterRoles — the VM role with a
// RoleBinding in ns, the others with ClusterRoleBindings — and returns a token for it from
// the TokenRequest API.
func drServiceAccount(ctx context.Context, ns, name string, roles ...string) string {
	GinkgoHelper()
	create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}
	for _, role := range roles {
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}
		if role == rbac.ClusterRoleVirtualMachines {
			create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, RoleRef: ref, Subjects: subject})
			continue
		}
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, RoleRef: ref, Subjects: subject}
		create(ctx, crb)
		DeferCleanup(func(ctx context.Context) { Expect(client.IgnoreNotFound(k8s.Delete(ctx, crb))).To(Succeed()) })
	}
	cs, err := kubernetes.NewForConfig(testEnv.Config)
	Expect(err).NotTo(HaveOccurred())
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrInt64(3600)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

func ptrInt64(v int64) *int64 { return &v }

// drHTTPClient trusts the endpoint's certificate and waits for 100 Continue when asked to.
func drHTTPClient(certPEM []byte) *http.Client {
	GinkgoHelper()
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(certPEM)).To(BeTrue())
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ExpectContinueTimeout: 5 * time.Second}}
}

// drPost posts body to the endpoint with the bearer token (none when empty) and headers.
func drPost(c *http.Client, srv *endpoint.Server, token string, body io.Reader, header ...string) (int, []byte) {
	GinkgoHelper()
	req, err := http.NewRequest(http.MethodPost, "https://"+srv.Addr()+dryrun.Path, body)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, data
}

// drBody is a request body for vm and objects.
func drBody(vm *vmv1.VirtualMachine, objects ...map[string]any) string {
	return drJSON(map[string]any{"vm": drManifest(vm), "objects": objects})
}

// drBodyWithPolicies is a request body for vm with candidate policies (JSON).
func drBodyWithPolicies(vm *vmv1.VirtualMachine, policies ...string) string {
	raws := make([]json.RawMessage, len(policies))
	for i, p := range policies {
		raws[i] = json.RawMessage(p)
	}
	return drJSON(map[string]any{"vm": drManifest(vm), "policies": raws})
}

func drManifest(vm *vmv1.VirtualMachine) *vmv1.VirtualMachine {
	vm = vm.DeepCopy()
	vm.ManagedFields = nil
	vm.APIVersion, vm.Kind = vmv1.GroupVersion.String(), "VirtualMachine"
	return vm
}

func drJSON(v any) string {
	GinkgoHelper()
	data, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// drTyped is obj as a manifest of the SDN kind.
func drTyped(obj client.Object, kind string) map[string]any {
	GinkgoHelper()
	obj.GetObjectKind().SetGroupVersionKind(sdnv1.GroupVersion.WithKind(kind))
	data, err := json.Marshal(obj)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]any{}
	Expect(json.Unmarshal(data, &out)).To(Succeed())
	return out
}

// drResult expects a 200 answer and decodes it.
func drResult(code int, data []byte) *dryrun.Result {
	GinkgoHelper()
	Expect(code).To(Equal(http.StatusOK), "%s", data)
	res := &dryrun.Result{}
	Expect(json.Unmarshal(data, res)).To(Succeed())
	return res
}

// drStatus decodes an error answer.
func drStatus(data []byte) *metav1.Status {
	GinkgoHelper()
	st := &metav1.Status{}
	Expect(json.Unmarshal(data, st)).To(Succeed())
	Expect(st.Kind).To(Equal("Status"), "%s", data)
	return st
}

// drMetric sums the series of a vmipam metric whose label has the value.
func drMetric(name, label, value string) float64 {
	GinkgoHelper()
	families, err := ctrlmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

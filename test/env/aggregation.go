package env

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FrontProxyClientName is the common name of the certificate the kube-apiserver presents as
// the front proxy (aggregator) to aggregated API servers.
const FrontProxyClientName = "front-proxy-client"

// frontProxyFlags makes the kube-apiserver a front proxy for aggregated APIs: a CA for
// requestheader authentication, a client certificate it proxies with, the header names. The
// kube-apiserver publishes them in kube-system/extension-apiserver-authentication, which
// aggregated servers (k8s.io/apiserver's delegated authentication) read.
func frontProxyFlags(dir string) (map[string]string, error) {
	ca, err := newAuthority("vmipam-envtest-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.issue(FrontProxyClientName, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return nil, err
	}
	dir = filepath.Join(dir, "front-proxy")
	certFile, keyFile, err := writeFiles(dir, "client", certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.pem, 0o600); err != nil {
		return nil, err
	}
	return map[string]string{
		"requestheader-client-ca-file":       caFile,
		"requestheader-allowed-names":        FrontProxyClientName,
		"requestheader-username-headers":     "X-Remote-User",
		"requestheader-group-headers":        "X-Remote-Group",
		"requestheader-extra-headers-prefix": "X-Remote-Extra-",
		"proxy-client-cert-file":             certFile,
		"proxy-client-key-file":              keyFile,
	}, nil
}

// ServingCert is a serving certificate and key (files in the environment's directory) and
// the PEM of the CA that signed it, for a caBundle.
type ServingCert struct {
	CertFile, KeyFile string
	CA                []byte
}

// ServingCert issues a serving certificate for the Service namespace/name — SANs
// <name>.<namespace>.svc (the name the API server verifies when it calls a webhook or an
// aggregated API through the Service), its .cluster.local form, localhost and 127.0.0.1 — signed
// by a CA of its own, and writes it into Dir/serving-<namespace>-<name>/.
func (e *Environment) ServingCert(namespace, name string) (ServingCert, error) {
	ca, err := newAuthority("vmipam-envtest-serving-ca-" + namespace + "-" + name)
	if err != nil {
		return ServingCert{}, err
	}
	host := name + "." + namespace + ".svc"
	certPEM, keyPEM, err := ca.issue(host, x509.ExtKeyUsageServerAuth, host, host+".cluster.local", "localhost", "127.0.0.1")
	if err != nil {
		return ServingCert{}, err
	}
	certFile, keyFile, err := writeFiles(filepath.Join(e.Dir, "serving-"+namespace+"-"+name), "tls", certPEM, keyPEM)
	return ServingCert{CertFile: certFile, KeyFile: keyFile, CA: ca.pem}, err
}

// LocalService turns svc, in place, into a Service of type ExternalName for localhost, keeping
// its name, namespace and ports. No kube-proxy runs here, so a ClusterIP leads nowhere, and an
// Endpoints address may not be a loopback one; the API server's service resolver, used for
// aggregated APIs and webhooks, follows an ExternalName Service to
// https://<externalName>:<port> — the Service's port, which the local server must listen on
// (or the referrer's port must be rewritten to the local server's).
func LocalService(svc *corev1.Service) {
	svc.Spec.Type = corev1.ServiceTypeExternalName
	svc.Spec.ExternalName = "localhost"
	svc.Spec.ClusterIP, svc.Spec.ClusterIPs, svc.Spec.IPFamilies, svc.Spec.IPFamilyPolicy = "", nil, nil, nil
	svc.Spec.Selector, svc.Spec.InternalTrafficPolicy, svc.Spec.ExternalTrafficPolicy = nil, nil, ""
	svc.Spec.SessionAffinity, svc.Spec.HealthCheckNodePort = "", 0
	for i := range svc.Spec.Ports {
		svc.Spec.Ports[i].NodePort = 0
	}
}

// ApplyLocalService creates svc as LocalService makes it, replacing a Service of that name
// (deleted first: a ClusterIP Service cannot be turned into an ExternalName one in place), and
// creates its namespace when missing.
func ApplyLocalService(ctx context.Context, c client.Client, svc *corev1.Service) error {
	svc = svc.DeepCopy()
	LocalService(svc)
	svc.ResourceVersion, svc.UID = "", ""
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: svc.Namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", svc.Namespace, err)
	}
	if err := c.Delete(ctx, svc); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("replacing Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if err := c.Create(ctx, svc); err != nil {
		return fmt.Errorf("creating Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// APIServiceGVK is the kind of APIService objects (apiregistration.k8s.io/v1).
var APIServiceGVK = schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}

// RegisterAPIService creates or updates the APIService of group/version, served by the
// Service svcNamespace/svcName on port and trusted by caBundle, and waits until the API
// server reports it Available (its discovery answered through the Service), at most timeout.
func RegisterAPIService(ctx context.Context, c client.Client, group, version, svcNamespace, svcName string, port int32,
	caBundle []byte, timeout time.Duration) error {
	apiService := &unstructured.Unstructured{}
	apiService.SetGroupVersionKind(APIServiceGVK)
	apiService.SetName(version + "." + group)
	spec := map[string]any{
		"group": group, "version": version, "groupPriorityMinimum": int64(1000), "versionPriority": int64(100),
		"caBundle": base64.StdEncoding.EncodeToString(caBundle), "service": map[string]any{"namespace": svcNamespace, "name": svcName, "port": int64(port)},
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // the availability check writes its status
		err := c.Get(ctx, client.ObjectKeyFromObject(apiService), apiService)
		switch {
		case apierrors.IsNotFound(err):
			apiService.Object["spec"] = spec
			return c.Create(ctx, apiService)
		case err != nil:
			return err
		}
		apiService.Object["spec"] = spec
		return c.Update(ctx, apiService)
	})
	if err != nil {
		return fmt.Errorf("APIService %s: %w", apiService.GetName(), err)
	}
	return WaitAPIServiceAvailable(ctx, c, apiService.GetName(), timeout)
}

// WaitAPIServiceAvailable waits until the named APIService has Available=True and its
// generation is observed by the availability check. It returns the last message on timeout.
func WaitAPIServiceAvailable(ctx context.Context, c client.Client, name string, timeout time.Duration) error {
	last := "no status yet"
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(APIServiceGVK)
		if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			last = err.Error()
			return false, nil
		}
		conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, raw := range conditions {
			cond, _ := raw.(map[string]any)
			if cond["type"] == "Available" {
				last = fmt.Sprintf("%v: %v", cond["reason"], cond["message"])
				return cond["status"] == "True", nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s not Available within %s: %s", name, timeout, last)
	}
	return nil
}

package env_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/vmipam/vmipam/test/env"
)

// TestLocalServiceKeepsNameAndPortsAndLeadsToLocalhost: a Service from the install manifests
// becomes one the API server's resolver follows to localhost, on the same ports, and keeps
// nothing that API validation refuses for an ExternalName Service.
func TestLocalServiceKeepsNameAndPortsAndLeadsToLocalhost(t *testing.T) {
	local := corev1.ServiceInternalTrafficPolicyLocal
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "vmipam-system", Name: "vmipam"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.0.0.7", ClusterIPs: []string{"10.0.0.7"},
			Selector: map[string]string{"app": "vmipam"}, InternalTrafficPolicy: &local, SessionAffinity: corev1.ServiceAffinityClientIP,
			Ports: []corev1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), NodePort: 30443}}}}
	env.LocalService(svc)
	s := svc.Spec
	if s.Type != corev1.ServiceTypeExternalName || s.ExternalName != "localhost" {
		t.Errorf("type %s externalName %q, want ExternalName localhost", s.Type, s.ExternalName)
	}
	if s.ClusterIP != "" || s.ClusterIPs != nil || s.Selector != nil || s.InternalTrafficPolicy != nil || s.SessionAffinity != "" {
		t.Errorf("spec keeps fields of a proxied Service: %+v", s)
	}
	if len(s.Ports) != 1 || s.Ports[0].Port != 443 || s.Ports[0].Name != "https" || s.Ports[0].NodePort != 0 {
		t.Errorf("ports = %+v, want https 443 kept without a node port", s.Ports)
	}
	if svc.Namespace != "vmipam-system" || svc.Name != "vmipam" {
		t.Errorf("renamed to %s/%s", svc.Namespace, svc.Name)
	}
}

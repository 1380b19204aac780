package integration

import (
	"context"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/deploy"
	"github.com/vmipam/vmipam/test/build"
)

// vmipamConfig authenticates as the chart's ServiceAccount (a TokenRequest token): the suite's
// vmipam controller runs with exactly the RBAC and ValidatingAdmissionPolicy the chart ships,
// so a missing verb or a write the policy refuses fails the scenarios as on a cluster.
var vmipamConfig *rest.Config

// identityKinds are the chart's objects that make the controller's identity.
var identityKinds = map[string]bool{"ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"Role": true, "RoleBinding": true, "ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true}

// installIdentity applies those objects of the rendered chart and returns the
// ServiceAccount's client configuration.
func installIdentity(ctx context.Context) *rest.Config {
	const release, namespace = "vmipam", "vmipam-system"
	objs, err := deploy.Objects(release, namespace, nil)
	Expect(err).NotTo(HaveOccurred())
	Expect(k8s.Create(ctx, build.Namespace(namespace))).To(Succeed())
	for _, u := range objs {
		if identityKinds[u.GetKind()] {
			Expect(k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("integration-test"),
				client.ForceOwnership)).To(Succeed(), "apply %s %s", u.GetKind(), u.GetName())
		}
	}
	cfg, _, err := testEnv.ServiceAccount(ctx, namespace, release)
	Expect(err).NotTo(HaveOccurred())
	return cfg
}

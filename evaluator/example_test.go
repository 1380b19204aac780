package evaluator_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vmipam/vmipam/evaluator"
	"github.com/vmipam/vmipam/policies"
	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// Compile a policy once, put it in a Set with the built-in default, then decide per
// interface.
func Example() {
	compiler, err := evaluator.NewCompiler(evaluator.DefaultLimits)
	if err != nil {
		panic(err)
	}
	prod := &v1alpha1.ClusterIPAMPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-static-only", Generation: 1},
		Spec: v1alpha1.ClusterIPAMPolicySpec{
			Priority: 10,
			Match: v1alpha1.Match{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"env": "prod"}}},
			MatchConditions: []v1alpha1.NamedExpression{{Name: "pooled", Expression: "network.ipamEnabled"}},
			Allocation:      &v1alpha1.Expression{Expression: "'Static'"},
			SkipRules: []v1alpha1.SkipRule{{
				Name:              "static-required",
				Expression:        "interface.ipAddressName == ''",
				Reason:            "StaticAddressRequired",
				MessageExpression: "'interface ' + string(interface.index) + ' of VM ' + vm.name + ' needs an ipAddressName in production'",
			}},
		},
	}
	compiled, errs := compiler.Compile(prod, nil)
	if len(errs) > 0 {
		panic(errs.ToAggregate())
	}
	builtin, err := policies.Builtin()
	if err != nil {
		panic(err)
	}
	fallback, errs := compiler.Compile(builtin, builtin)
	if len(errs) > 0 {
		panic(errs.ToAggregate())
	}
	set := evaluator.NewSet([]*evaluator.Policy{compiled}, fallback)

	in := evaluator.Input{
		VM:        evaluator.VM{Name: "db-0", Namespace: "shop"},
		Interface: evaluator.Interface{Index: 1, Type: "ClusterNetwork", Name: "corp"},
		Network:   evaluator.Network{Exists: true, Ready: true, IPAMEnabled: true},
		Namespace: evaluator.Namespace{Name: "shop", Labels: map[string]string{"env": "prod"}},
	}
	d := set.Decide(context.Background(), in, evaluator.Options{})
	fmt.Println(d.Policy, d.Allocation, d.Skip, d.Reason, d.Rule)
	fmt.Println(d.Message)

	in.Namespace.Labels["env"] = "dev"
	in.IPAddress = evaluator.IPAddress{Name: "db-0-clusternetwork-corp"} // not created yet
	d = set.Decide(context.Background(), in, evaluator.Options{})
	fmt.Println(d.Policy, d.Allocation, d.Skip, d.Reason, d.Rule)
	fmt.Println(d.Message)
	// Output:
	// prod-static-only Static true StaticAddressRequired static-required
	// interface 1 of VM db-0 needs an ipAddressName in production
	// builtin:default Auto true IPAddressPending auto-pending
	// waiting for SDN to allocate IPAddress db-0-clusternetwork-corp
}

// Compile reports every problem of a policy at once, each with its field path.
func ExampleCompiler_Compile() {
	compiler, err := evaluator.NewCompiler(evaluator.Limits{})
	if err != nil {
		panic(err)
	}
	broken := &v1alpha1.ClusterIPAMPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "broken"},
		Spec: v1alpha1.ClusterIPAMPolicySpec{
			Allocation: &v1alpha1.Expression{Expression: "'DHCP'"},
			SkipRules: []v1alpha1.SkipRule{
				{Name: "missing", Expression: "!ipAdress.exists", Reason: "IPAddressNotFound"},
			},
			Hotplug: &v1alpha1.Expression{Expression: "change.kind"},
		},
	}
	_, errs := compiler.Compile(broken, nil)
	for _, e := range errs {
		fmt.Println(e.Field)
	}
	// Output:
	// spec.allocation.expression
	// spec.skipRules[0].expression
	// spec.hotplug.expression
}

package vm

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/vmipam/vmipam/controller/metrics"
	"github.com/vmipam/vmipam/controller/plan"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// interfaceStates are the metrics.Interface of every additional interface of a plan, for the
// state gauges. A repeated entry (DuplicateInterface) counts as the skipped interface it is;
// an interface removed from the spec (kept on the running pod until a restart) is not one of
// the VM's interfaces any more and is not counted.
func interfaceStates(vm types.NamespacedName, p *plan.Plan) []metrics.Interface {
	out := make([]metrics.Interface, 0, len(p.Interfaces))
	for _, it := range p.Interfaces {
		if it.Removed {
			continue
		}
		network := metrics.Network{Kind: it.Type, Name: it.Name}
		if it.Type == string(vmv1.NetworkTypeNetwork) {
			network.Namespace = vm.Namespace
		}
		out = append(out, metrics.InterfaceFor(it.Reason, string(it.Decision.Allocation), network))
	}
	return out
}

package sandbox

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/naming"
	"github.com/vmipam/vmipam/controller/vm"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
)

// Row is one VM interface as a user sees it in the cluster.
type Row struct {
	VM, Network, Mode, IPAddress, Address, Skipped string
	// Pod is the VM's launcher pod at the time of the snapshot.
	Pod string
}

// VMState is one VM's NetworkReady condition.
type VMState struct {
	VM, NetworkReady, Message string
}

// Snapshot reads every additional interface of every VM in the namespace from what vmipam
// published: the VM's networks-spec (attached interfaces and their mode), status.networks
// (addresses) and NetworkReady (skip reasons).
func Snapshot(ctx context.Context, c client.Reader, namespace string) ([]Row, []VMState, error) {
	var vms vmv1.VirtualMachineList
	if err := c.List(ctx, &vms, client.InNamespace(namespace)); err != nil {
		return nil, nil, err
	}
	var rows []Row
	var states []VMState
	for i := range vms.Items {
		v := &vms.Items[i]
		pod, err := launcherPod(ctx, c, v)
		if err != nil {
			return nil, nil, err
		}
		for _, n := range v.Spec.Networks {
			if n.Type != vmv1.NetworkTypeMain {
				rows = append(rows, row(v, n, pod))
			}
		}
		st := VMState{VM: v.Name, NetworkReady: "Unknown"}
		if c := meta.FindStatusCondition(v.Status.Conditions, vm.ConditionNetworkReady); c != nil {
			st.NetworkReady, st.Message = string(c.Status), c.Message
		}
		states = append(states, st)
	}
	return rows, states, nil
}

func launcherPod(ctx context.Context, c client.Reader, v *vmv1.VirtualMachine) (string, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(v.Namespace),
		client.MatchingLabels{vmv1.LabelLauncherVMName: v.Name}); err != nil {
		return "", err
	}
	names := []string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	return strings.Join(names, ","), nil
}

func row(v *vmv1.VirtualMachine, n vmv1.NetworksSpec, pod string) Row {
	r := Row{VM: v.Name, Network: string(n.Type) + "/" + n.Name, Mode: "-", Pod: pod}
	for _, e := range parseSpec(v.Annotations[sdnv1.AnnotationNetworksSpec]) {
		if e.Type != string(n.Type) || e.Name != n.Name {
			continue
		}
		switch {
		case len(e.IPAddressNames) == 0:
			r.Mode = "None (L2)"
		case e.IPAddressNames[0] == naming.AutoIPAddress(v.Name, string(n.Type), n.Name):
			r.Mode, r.IPAddress = "Auto", e.IPAddressNames[0]
		default:
			r.Mode, r.IPAddress = "Static", e.IPAddressNames[0]
		}
	}
	for _, s := range v.Status.Networks {
		if s.Type == n.Type && s.Name == n.Name {
			r.Address = s.IPAddress
		}
	}
	if c := meta.FindStatusCondition(v.Status.Conditions, vm.ConditionNetworkReady); c != nil {
		prefix := r.Network + ": "
		for _, item := range strings.Split(c.Message, "; ") {
			if rest, ok := strings.CutPrefix(item, prefix); ok {
				r.Skipped, _, _ = strings.Cut(rest, ":")
			}
		}
	}
	return r
}

// PrintTable writes the rows and the VMs' NetworkReady as aligned tables.
func PrintTable(w io.Writer, rows []Row, states []VMState) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VM\tNETWORK\tMODE\tIPADDRESS\tADDRESS\tSKIPPED\tLAUNCHER POD")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.VM, r.Network, r.Mode, dash(r.IPAddress),
			dash(r.Address), dash(r.Skipped), dash(r.Pod))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "VM\tNETWORKREADY\tMESSAGE")
	for _, s := range states {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.VM, s.NetworkReady, s.Message)
	}
	_ = tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func parseSpec(s string) []sdnv1.NetworksSpecEntry {
	out, _ := sdnv1.ParseNetworksSpec(s) // unreadable shows as nothing attached
	return out
}

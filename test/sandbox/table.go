package sandbox

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmipam/vmipam/controller/naming"
	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	vmv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
	ipamv1 "github.com/vmipam/vmipam/policies/v1alpha1"
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

// Record is one VM's decision record as `kubectl get virtualmachineipams` shows it.
type Record struct {
	VM, Attached, Reason string
	Generation, Observed int64
}

// Snapshot reads every additional interface of every VM in the namespace as a user sees it:
// what its launcher pod carries (the interfaces attached and their mode, from the pod's
// networks-spec; a stopped VM's are none), status.networks (addresses) and NetworkReady (skip
// reasons), all written by the virtualization controller (here its stand-in) from vmipam's
// decision records; and each VM's record.
func Snapshot(ctx context.Context, c client.Reader, namespace string) ([]Row, []VMState, []Record, error) {
	var vms vmv1.VirtualMachineList
	if err := c.List(ctx, &vms, client.InNamespace(namespace)); err != nil {
		return nil, nil, nil, err
	}
	var rows []Row
	var states []VMState
	var records []Record
	for i := range vms.Items {
		v := &vms.Items[i]
		pod, entries, err := launcherPod(ctx, c, v)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, n := range v.Spec.Networks {
			if n.Type != vmv1.NetworkTypeMain {
				rows = append(rows, row(v, n, pod, entries))
			}
		}
		st := VMState{VM: v.Name, NetworkReady: "Unknown"}
		if c := meta.FindStatusCondition(v.Status.Conditions, consumer.ConditionNetworkReady); c != nil {
			st.NetworkReady, st.Message = string(c.Status), c.Message
		}
		states = append(states, st)
		rec := &ipamv1.VirtualMachineIPAM{}
		switch err := c.Get(ctx, client.ObjectKeyFromObject(v), rec); {
		case err == nil:
			records = append(records, Record{VM: v.Name, Attached: rec.Spec.Summary.Attached, Reason: rec.Spec.Summary.Reason,
				Generation: rec.Generation, Observed: rec.Status.ObservedGeneration})
		case !apierrors.IsNotFound(err):
			return nil, nil, nil, err
		}
	}
	return rows, states, records, nil
}

// launcherPod returns the names of the VM's launcher pods that are not being deleted, and the
// networks-spec the oldest of them carries.
func launcherPod(ctx context.Context, c client.Reader, v *vmv1.VirtualMachine) (string, []sdnv1.NetworksSpecEntry, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(v.Namespace),
		client.MatchingLabels{vmv1.LabelLauncherVMName: v.Name}); err != nil {
		return "", nil, err
	}
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	slices.SortFunc(live, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	names := []string{}
	for _, p := range live {
		names = append(names, p.Name)
	}
	if len(live) == 0 {
		return "", nil, nil
	}
	return strings.Join(names, ","), parseSpec(live[0].Annotations[sdnv1.AnnotationNetworksSpec]), nil
}

func row(v *vmv1.VirtualMachine, n vmv1.NetworksSpec, pod string, entries []sdnv1.NetworksSpecEntry) Row {
	r := Row{VM: v.Name, Network: string(n.Type) + "/" + n.Name, Mode: "-", Pod: pod}
	for _, e := range entries {
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
	if c := meta.FindStatusCondition(v.Status.Conditions, consumer.ConditionNetworkReady); c != nil {
		prefix := r.Network + ": "
		for _, item := range strings.Split(c.Message, "; ") {
			if rest, ok := strings.CutPrefix(item, prefix); ok {
				r.Skipped, _, _ = strings.Cut(rest, ":")
			}
		}
	}
	return r
}

// PrintTable writes the rows, the VMs' NetworkReady and their records as aligned tables.
func PrintTable(w io.Writer, rows []Row, states []VMState, records []Record) {
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
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "VIRTUALMACHINEIPAM\tATTACHED\tREASON\tGENERATION\tOBSERVED")
	for _, r := range records {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", r.VM, r.Attached, dash(r.Reason), r.Generation, r.Observed)
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

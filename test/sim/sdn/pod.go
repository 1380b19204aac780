package sdn

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/test/sim/internal/mac"
)

// indexIPAddressNames is the cache index of launcher pods by the IPAddress names their
// networks-spec annotation carries (SDN's own bookkeeping of which pod uses which address).
const indexIPAddressNames = "sdn.vmipam.test/ipAddressNames"

// setupPod registers sdn-sim-pod: launcher pods, and IPAddresses mapped to the launcher pods
// whose networks-spec names them (through indexIPAddressNames, so an IPAddress event costs a
// lookup, not a parse of every launcher pod's annotation).
func (s *Simulator) setupPod(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, indexIPAddressNames, ipAddressNamesOf); err != nil {
		return fmt.Errorf("indexing launcher pods by IPAddress name: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("sdn-sim-pod").
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(isLauncher))).
		Watches(&sdnv1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(s.podsUsing)).
		Complete(reconcile.Func(s.ReconcilePod))
}

// ipAddressNamesOf is the index function of indexIPAddressNames: the IPAddress names in a
// launcher pod's networks-spec; none for other pods or an annotation that is not valid JSON.
func ipAddressNamesOf(o client.Object) []string {
	pod, ok := o.(*corev1.Pod)
	if !ok || !isLauncher(pod) {
		return nil
	}
	spec, _, _ := networksSpec(pod)
	var names []string
	for _, e := range spec {
		for _, n := range e.IPAddressNames {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return names
}

// isLauncher reports whether o is a VM's launcher pod.
func isLauncher(o client.Object) bool {
	return o.GetLabels()[virtv1.LabelLauncherVMName] != ""
}

// ReconcilePod answers the networks-spec annotation of a launcher pod with networks-status, and
// removes networks-status when networks-spec is gone. It patches only on a change. A
// networks-spec that is not valid JSON is a terminal error.
func (s *Simulator) ReconcilePod(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := s.Client.Get(ctx, req.NamespacedName, pod); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !isLauncher(pod) || pod.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	want, present, err := s.desiredStatus(ctx, pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	cur, has := pod.Annotations[sdnv1.AnnotationNetworksStatus]
	if has == present && cur == want {
		return ctrl.Result{}, nil
	}
	base := pod.DeepCopy()
	if present {
		metav1.SetMetaDataAnnotation(&pod.ObjectMeta, sdnv1.AnnotationNetworksStatus, want)
	} else {
		delete(pod.Annotations, sdnv1.AnnotationNetworksStatus)
	}
	if err := s.Client.Patch(ctx, pod, client.MergeFrom(base)); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing networks-status of pod %s: %w", klog.KObj(pod), err)
	}
	return ctrl.Result{}, nil
}

// desiredStatus is the networks-status pod should carry; present is false when pod has no
// networks-spec.
func (s *Simulator) desiredStatus(ctx context.Context, pod *corev1.Pod) (value string, present bool, err error) {
	spec, present, err := networksSpec(pod)
	if err != nil || !present {
		return "", false, err
	}
	configs, err := s.addressConfigs(ctx, pod.Namespace, spec)
	if err != nil {
		return "", false, err
	}
	b, err := json.Marshal(networksStatus(pod.Namespace, pod.Labels[virtv1.LabelLauncherVMName], spec, configs))
	if err != nil {
		return "", false, fmt.Errorf("encoding networks-status: %w", err)
	}
	return string(b), true, nil
}

// networksSpec decodes pod's networks-spec annotation.
func networksSpec(pod *corev1.Pod) ([]sdnv1.NetworksSpecEntry, bool, error) {
	raw, ok := pod.Annotations[sdnv1.AnnotationNetworksSpec]
	if !ok {
		return nil, false, nil
	}
	spec, err := sdnv1.ParseNetworksSpec(raw)
	if err != nil {
		return nil, false, reconcile.TerminalError(fmt.Errorf("pod %s: %w", klog.KObj(pod), err))
	}
	return spec, true, nil
}

// addressConfigs looks up the IPAddresses spec names, in namespace, and returns the config of
// each Allocated one by name. Missing IPAddresses are left out.
func (s *Simulator) addressConfigs(ctx context.Context, namespace string, spec []sdnv1.NetworksSpecEntry) (map[string]sdnv1.IPAddressConfig, error) {
	configs := map[string]sdnv1.IPAddressConfig{}
	for _, e := range spec {
		for _, name := range e.IPAddressNames {
			ip := &sdnv1.IPAddress{}
			err := s.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, ip)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("getting IPAddress %s/%s: %w", namespace, name, err)
			}
			if _, ok := allocatedAddr(ip); ok {
				configs[name] = sdnv1.IPAddressConfig{Name: name, Address: ip.Status.Address, Network: ip.Status.Network,
					Routes: ip.Status.Routes}
			}
		}
	}
	return configs, nil
}

// networksStatus is SDN's answer to spec on a launcher pod of VM vm in namespace: every NIC
// configured and negotiated, with a stable MAC and the configs of its allocated addresses.
func networksStatus(namespace, vm string, spec []sdnv1.NetworksSpecEntry, configs map[string]sdnv1.IPAddressConfig) []sdnv1.NetworksStatusEntry {
	out := make([]sdnv1.NetworksStatusEntry, 0, len(spec))
	nth := map[[2]string]int{}
	for _, e := range spec {
		k := [2]string{e.Type, e.Name}
		st := sdnv1.NetworksStatusEntry{
			Type: e.Type, Name: e.Name, IfName: e.IfName,
			MAC: mac.NIC(namespace, vm, e.Type, e.Name, nth[k]),
			Conditions: []sdnv1.NICCondition{
				{Type: sdnv1.NICConditionConfigured, Status: string(metav1.ConditionTrue), Reason: sdnv1.NICReasonInterfaceConfiguredSuccessfully},
				{Type: sdnv1.NICConditionNegotiated, Status: string(metav1.ConditionTrue), Reason: sdnv1.NICReasonUp},
			},
		}
		nth[k]++
		for _, name := range e.IPAddressNames {
			if c, ok := configs[name]; ok {
				st.IPAddressConfigs = append(st.IPAddressConfigs, c)
			}
		}
		out = append(out, st)
	}
	return out
}

// podsUsing maps an IPAddress to the launcher pods of its namespace whose networks-spec names it.
func (s *Simulator) podsUsing(ctx context.Context, ip client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	err := s.Client.List(ctx, pods, client.InNamespace(ip.GetNamespace()), client.MatchingFields{indexIPAddressNames: ip.GetName()})
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing launcher pods", "ipAddress", klog.KObj(ip))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(pods.Items))
	for i := range pods.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods.Items[i])})
	}
	return reqs
}

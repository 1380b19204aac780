package sdn

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	sdnv1 "github.com/vmipam/vmipam/crds/sdn/v1alpha1"
)

// indexConfiguredIPAddresses is the cache index of launcher pods by the IPAddresses their
// networks-status reports configured: what SDN's node agent knows of which pod uses which
// address.
const indexConfiguredIPAddresses = "sdn.vmipam.test/configuredIPAddresses"

// configuredIPAddressesOf is the index function of indexConfiguredIPAddresses: the names of the
// ipAddressConfigs of the NICs a launcher pod's networks-status reports Configured=True.
func configuredIPAddressesOf(o client.Object) []string {
	pod, ok := o.(*corev1.Pod)
	if !ok || !isLauncher(pod) {
		return nil
	}
	var entries []sdnv1.NetworksStatusEntry
	if json.Unmarshal([]byte(pod.Annotations[sdnv1.AnnotationNetworksStatus]), &entries) != nil { // absent or unreadable: none
		return nil
	}
	var names []string
	for _, e := range entries {
		if !configured(e) {
			continue
		}
		for _, c := range e.IPAddressConfigs {
			if !slices.Contains(names, c.Name) {
				names = append(names, c.Name)
			}
		}
	}
	return names
}

// configured reports whether a NIC's Configured condition is True.
func configured(e sdnv1.NetworksStatusEntry) bool {
	for _, c := range e.Conditions {
		if c.Type == sdnv1.NICConditionConfigured {
			return c.Status == string(metav1.ConditionTrue)
		}
	}
	return false
}

// configuredOn maps a launcher pod to the IPAddresses its networks-status reports configured.
func configuredOn(_ context.Context, o client.Object) []reconcile.Request {
	names := configuredIPAddressesOf(o)
	reqs := make([]reconcile.Request, 0, len(names))
	for _, n := range names {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: n}})
	}
	return reqs
}

// networksStatusChanged lets through the launcher pod events that can change an attachment:
// creations, deletions, and updates of networks-status.
var networksStatusChanged = predicate.And(predicate.NewPredicateFuncs(isLauncher), predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetAnnotations()[sdnv1.AnnotationNetworksStatus] != e.ObjectNew.GetAnnotations()[sdnv1.AnnotationNetworksStatus]
	},
})

// AttachWorkers is how many IPAddresses sdn-sim-attach updates at once. SDN's node agents write
// the attachments, each for the pods of its node, beside the allocator; the stand-in's one
// controller plays the agents of a few nodes.
const AttachWorkers = 4

// setupAttach registers sdn-sim-attach, the node agents' part of SDN: it keeps the attachments
// (condition Attached, status.usedByPods) of allocated IPAddresses, on a change of the
// IPAddress and of the networks-status of a launcher pod that reports one configured. It has a
// queue and workers of its own, as the agents are processes of their own: attachments never
// wait behind allocations, nor allocations behind attachments.
func (s *Simulator) setupAttach(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, indexConfiguredIPAddresses, configuredIPAddressesOf); err != nil {
		return fmt.Errorf("indexing launcher pods by configured IPAddress: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("sdn-sim-attach").
		For(&sdnv1.IPAddress{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(configuredOn), builder.WithPredicates(networksStatusChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: AttachWorkers}).
		Complete(reconcile.Func(s.ReconcileAttachment))
}

// ReconcileAttachment sets the attachments of the IPAddress req names when it is allocated
// (attach); one that is gone, being deleted or not allocated is left alone. A write that loses
// an optimistic-locking race — to the allocator's, say — is retried soon.
func (s *Simulator) ReconcileAttachment(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ip := &sdnv1.IPAddress{}
	if err := s.Client.Get(ctx, req.NamespacedName, ip); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting IPAddress %s: %w", req.NamespacedName, err)
	}
	if ip.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	return s.attach(ctx, ip)
}

// attach sets the allocated IPAddress ip's attachments, as SDN's node agent does: status.usedByPods
// lists the launcher pods whose networks-status reports it configured, and condition Attached is
// True while there is one, False once there is none any more (absent before the first).
func (s *Simulator) attach(ctx context.Context, ip *sdnv1.IPAddress) (ctrl.Result, error) {
	if _, ok := allocatedAddr(ip); !ok {
		return ctrl.Result{}, nil
	}
	pods := &corev1.PodList{}
	if err := s.Client.List(ctx, pods, client.InNamespace(ip.Namespace), client.MatchingFields{indexConfiguredIPAddresses: ip.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the launcher pods of IPAddress %s/%s: %w", ip.Namespace, ip.Name, err)
	}
	names := make([]string, 0, len(pods.Items))
	for i := range pods.Items {
		names = append(names, pods.Items[i].Name)
	}
	slices.Sort(names)
	err := s.writeStatus(ctx, ip, func(st *sdnv1.IPAddressStatus) { setAttachment(st, ip.Namespace, names, ip.Generation) })
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(err) // deleted since read: nothing to attach
}

// setAttachment writes into st the pods (of namespace) the address is configured in.
func setAttachment(st *sdnv1.IPAddressStatus, namespace string, pods []string, generation int64) {
	st.UsedByPods = nil
	for _, p := range pods {
		raw, _ := json.Marshal(sdnv1.PodRef{Namespace: namespace, Name: p}) // two strings: cannot fail
		st.UsedByPods = append(st.UsedByPods, apiextensionsv1.JSON{Raw: raw})
	}
	if len(pods) == 0 {
		if c := meta.FindStatusCondition(st.Conditions, sdnv1.ConditionAttached); c != nil {
			meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: sdnv1.ConditionAttached, Status: metav1.ConditionFalse,
				Reason: ReasonNotConfiguredInPod, Message: "no pod has the address configured", ObservedGeneration: generation})
		}
		return
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: sdnv1.ConditionAttached, Status: metav1.ConditionTrue,
		Reason: ReasonConfiguredInPod, Message: "configured in pod " + strings.Join(pods, ", "), ObservedGeneration: generation})
}

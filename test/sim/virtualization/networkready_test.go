package virtualization

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	virtv1 "github.com/vmipam/vmipam/crds/virtualization/v1alpha2"
	"github.com/vmipam/vmipam/policies/consumer"
)

// VC's NetworkReady (evaluateAdditionalNetworks → extractNetworkStatusFromPods over every
// launcher pod not Succeeded) is False while any launcher pod — a migration target too — has
// not reported an interface. The stand-in read the oldest pod alone (a fresh helper's find):
// during a migration it showed ConfigurationApplied False, waiting for SDN, beside NetworkReady
// True.
func TestNetworkReadyWaitsForEveryLauncherPodAsVCDoes(t *testing.T) {
	s, _ := newSim(t, newVM("vm", networks(onCorp("corp"), onCorp("lan"))), newOp("op", virtv1.OperationMigrate, "vm"))
	s.MigrationDuration = time.Minute
	runningWithCorp(t, s, "vm")
	reconcileOp(t, s, "op")
	reconcileVM(t, s, "vm")
	pods := podsOf(t, s, "vm")
	if len(pods) != 2 || migrationTarget(pods) == nil {
		t.Fatalf("launcher pods = %v, want a migration under way", podNames(pods))
	}
	for i := range pods {
		answerSDN(t, s, &pods[i], configuredNIC("corp"))
	}
	reconcileVM(t, s, "vm")

	hotplugLan(t, s, "vm")
	pods = podsOf(t, s, "vm")
	answerSDN(t, s, &pods[0], configuredNIC("corp"), configuredNIC("lan")) // SDN answered one pod, not the other
	res := reconcileVM(t, s, "vm")
	wantKVVMWaiting(t, s, "vm", res) // the KVVM waits for the other pod: as VC
	c := meta.FindStatusCondition(getVM(t, s, "vm").Status.Conditions, consumer.ConditionNetworkReady)
	if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "lan") {
		t.Errorf("NetworkReady = %+v while pod %s has not reported lan; VC's extractNetworkStatusFromPods would give False (waiting for SDN to report status)",
			c, pods[1].Name)
	}
}

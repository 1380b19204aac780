package v1alpha1

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Annotations through which the VM side and SDN talk about a launcher pod's additional NICs.
const (
	// AnnotationNetworksSpec holds a JSON list of NetworksSpecEntry, one per attached
	// additional NIC. The virtualization controller writes it on the next-boot template and on
	// running launcher pods (live apply); SDN reads it from the pod.
	AnnotationNetworksSpec = "network.deckhouse.io/networks-spec"
	// AnnotationNetworksStatus holds a JSON list of NetworksStatusEntry, written by SDN on the
	// launcher pod once it has configured the NICs of networks-spec.
	AnnotationNetworksStatus = "network.deckhouse.io/networks-status"
)

// IPAssignmentModeDHCP tells SDN to serve the NIC's IPAddress to the guest by DHCP.
const IPAssignmentModeDHCP = "DHCP"

// NetworksSpecEntry is one attached additional NIC in the networks-spec annotation (SDN).
// IPAssignmentMode and IPAddressNames are set only for NICs with an address; an L2-only NIC
// has neither.
type NetworksSpecEntry struct {
	ID     int64  `json:"id,omitempty"`
	Type   string `json:"type"`
	Name   string `json:"name"`
	IfName string `json:"ifName"`
	// UID and GID are the owner of the NIC's tap device; the virtualization controller
	// always sends 64535.
	UID              int64    `json:"uid,omitempty"`
	GID              int64    `json:"gid,omitempty"`
	IPAssignmentMode string   `json:"ipAssignmentMode,omitempty"`
	IPAddressNames   []string `json:"ipAddressNames,omitempty"`
}

// NetworksStatusEntry is SDN's report on one NIC in the networks-status annotation.
type NetworksStatusEntry struct {
	Type             string            `json:"type"`
	Name             string            `json:"name"`
	IfName           string            `json:"ifName"`
	MAC              string            `json:"mac,omitempty"`
	Conditions       []NICCondition    `json:"conditions,omitempty"`
	IPAddressConfigs []IPAddressConfig `json:"ipAddressConfigs,omitempty"`
}

// Condition types of a NIC in networks-status, and the reasons SDN documents for them being
// True. Failing reasons seen from SDN: ConfigurationError, NoCarrier.
const (
	NICConditionConfigured                   = "Configured"
	NICReasonInterfaceConfiguredSuccessfully = "InterfaceConfiguredSuccessfully"
	NICConditionNegotiated                   = "Negotiated"
	NICReasonUp                              = "Up"
)

// NICCondition is a condition of one NIC (types Configured, Negotiated).
type NICCondition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// IPAddressConfig is an address SDN configured on a NIC.
type IPAddressConfig struct {
	Name    string  `json:"name"`
	Address string  `json:"address"`
	Network string  `json:"network"`
	Routes  []Route `json:"routes,omitempty"`
}

// ParseNetworksSpec decodes the value of a networks-spec annotation. An empty value is an
// empty list; a value that is not a JSON list of entries is an error naming the annotation.
// It is the one parser of the annotation: vmipam, its indexes and the SDN stand-in all read
// it through here, so that they agree on what an object carries.
func ParseNetworksSpec(value string) ([]NetworksSpecEntry, error) {
	if value == "" {
		return nil, nil
	}
	var out []NetworksSpecEntry
	if err := json.Unmarshal([]byte(value), &out); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationNetworksSpec, err)
	}
	return out, nil
}

// Equal reports whether e and o describe the same NIC, field by field; a nil and an empty
// IPAddressNames are the same.
func (e NetworksSpecEntry) Equal(o NetworksSpecEntry) bool {
	return e.ID == o.ID && e.Type == o.Type && e.Name == o.Name && e.IfName == o.IfName && e.UID == o.UID && e.GID == o.GID &&
		e.IPAssignmentMode == o.IPAssignmentMode && slices.Equal(e.IPAddressNames, o.IPAddressNames)
}

// NetworksSpecEqual reports whether two lists of entries are the same, in order: what two
// encodings of the annotation that differ only in key order or spacing parse to.
func NetworksSpecEqual(a, b []NetworksSpecEntry) bool {
	return slices.EqualFunc(a, b, NetworksSpecEntry.Equal)
}

// Package mac derives stable MAC addresses for the NICs of the test stand-ins, so that the VM
// runtime stand-in (status.networks[].macAddress) and the SDN stand-in (networks-status mac)
// report the same address for the same NIC without talking to each other.
package mac

import (
	"crypto/sha256"
	"fmt"
	"strconv"
)

// NIC returns the MAC of the nth NIC (0-based, counted among the VM's NICs on the same network)
// that VM vm in namespace attaches to the network of type netType and name netName. The
// address is locally administered and unicast (first octet 02) and the rest is a hash, so it
// is the same on every call.
func NIC(namespace, vm, netType, netName string, nth int) string {
	h := sha256.New()
	for _, p := range []string{namespace, vm, netType, netName, strconv.Itoa(nth)} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	b := h.Sum(nil)
	return fmt.Sprintf("02:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4])
}

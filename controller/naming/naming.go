package naming

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// hashLen is the number of base32 characters of the hash suffix: 30 bits. The readable prefix
// alone is ambiguous ("a" on "x-cn-corp" and "a-cn-x" on "corp" read the same), so every name
// carries the hash of the unambiguous triple.
const hashLen = 6

var b32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// typeAbbrev shortens a network type for names: "cn" for ClusterNetwork, "n" for Network.
func typeAbbrev(networkType string) string {
	if networkType == "ClusterNetwork" {
		return "cn"
	}
	return "n"
}

// AutoIPAddress is the name of the Auto IPAddress of the VM's interface on the given network:
// "<vm>-<cn|n>-<network>", lower-cased with characters outside [a-z0-9-] replaced by '-' and
// cut to fit, then "-" and 6 base32 characters of a SHA-256 of (vm, type, network). The result
// is a valid DNS-1123 label (≤ 63 characters) for any input and depends on nothing that can
// change while the interface exists, e.g. "web-cn-corp-q3x7ab".
func AutoIPAddress(vm, networkType, network string) string {
	sum := sha256.Sum256([]byte(vm + "\x00" + networkType + "\x00" + network))
	suffix := b32.EncodeToString(sum[:])[:hashLen]
	prefix := sanitize(vm + "-" + typeAbbrev(networkType) + "-" + network)
	if len(prefix) > validation.DNS1123LabelMaxLength-hashLen-1 {
		prefix = prefix[:validation.DNS1123LabelMaxLength-hashLen-1]
	}
	prefix = strings.Trim(prefix, "-")
	if prefix == "" {
		return "ip-" + suffix
	}
	return prefix + "-" + suffix
}

// MayBeAutoIPAddress reports whether name has the shape of an AutoIPAddress result: it ends
// in "-" and hashLen characters of the hash alphabet. A false answer is certain (no VM's Auto
// IPAddress has that name); a true one only says the name may be one, which costs a hash to
// check for a given VM and network.
func MayBeAutoIPAddress(name string) bool {
	if len(name) < hashLen+2 || name[len(name)-hashLen-1] != '-' {
		return false
	}
	for _, c := range name[len(name)-hashLen:] {
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// sanitize lower-cases s and replaces every character outside [a-z0-9-] with '-'.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '-'
	}, s)
}

// IfName is the Linux interface name of a NIC in networks-spec: "veth_" + type abbreviation +
// 8 hex characters of a hash of the network, at most 15 characters (IFNAMSIZ-1), as SDN
// expects (e.g. "veth_cn1a2b3c4d").
func IfName(networkType, network string) string {
	sum := sha256.Sum256([]byte(networkType + "\x00" + network))
	return "veth_" + typeAbbrev(networkType) + hex.EncodeToString(sum[:4])
}

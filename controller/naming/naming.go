package naming

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// hashLen is the number of base32 characters of the hash suffix: 50 bits, enough that two
// interfaces of one namespace never collide in practice.
const hashLen = 10

var b32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// typeAbbrev shortens a network type for names: "cn" for ClusterNetwork, "n" for Network.
func typeAbbrev(networkType string) string {
	if networkType == "ClusterNetwork" {
		return "cn"
	}
	return "n"
}

// AutoIPAddress is the name of the Auto IPAddress of the VM's interface on the given network:
// "<vm>-<cn|n>-<network>" when that is a valid DNS-1123 label (≤ 63 characters), else a
// prefix of it cut to 52 characters, sanitised, plus "-" and a 10-character hash of
// (vm, type, network). It depends on nothing that can change while the interface exists.
func AutoIPAddress(vm, networkType, network string) string {
	plain := vm + "-" + typeAbbrev(networkType) + "-" + network
	if len(validation.IsDNS1123Label(plain)) == 0 {
		return plain
	}
	sum := sha256.Sum256([]byte(vm + "\x00" + networkType + "\x00" + network))
	prefix := sanitize(plain)
	if len(prefix) > 63-hashLen-1 {
		prefix = prefix[:63-hashLen-1]
	}
	prefix = strings.Trim(prefix, "-")
	if prefix == "" {
		return "ip-" + b32.EncodeToString(sum[:])[:hashLen]
	}
	return prefix + "-" + b32.EncodeToString(sum[:])[:hashLen]
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

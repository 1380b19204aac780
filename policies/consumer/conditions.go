package consumer

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Conditions of the VirtualMachine's status that the consumer builds from a record, and their
// reasons (virtualization-controller facts §5; the texts are vmipam's).
const (
	// ConditionNetworkReady is True when every additional interface is attached.
	ConditionNetworkReady = "NetworkReady"
	// ReasonNetworkReady: every additional interface is attached.
	ReasonNetworkReady = "NetworkReady"
	// ReasonNetworkNotReady: at least one interface is not; the message has one
	// "<Type>/<name>: <Reason>: <message>" item per such interface, separated by "; ".
	ReasonNetworkNotReady = "NetworkNotReady"
	// ConditionAwaitingRestart is the virtualization platform's condition for changes that
	// apply at the next start.
	ConditionAwaitingRestart = "AwaitingRestartToApplyConfiguration"
	// ReasonChangesPendingRestart is the platform's reason on ConditionAwaitingRestart.
	ReasonChangesPendingRestart = "ChangesPendingRestart"
	// ReasonAwaitingRestart is the item of an interface the VM is to have but its running
	// launcher pod lacks, because its decision does not allow hot-plugging the change.
	ReasonAwaitingRestart = "AwaitingRestart"
	// ReasonDecisionPending is the item of an interface no record decides yet (no record, one
	// of an earlier VM of the same name, or one older than the VM's generation).
	ReasonDecisionPending = "DecisionPending"
)

// MaxConditionMessage is the maxLength of a condition message in the VirtualMachine CRD.
const MaxConditionMessage = 32768

// Item is one interface's entry in the NetworkReady message.
type Item struct {
	// Label is the interface, "<Type>/<name>" (Label).
	Label string
	// Reason is CamelCase, e.g. IPAddressNotFound; Message says what is wrong.
	Reason, Message string
}

// Bounds of one item: with 31 items every one still fits MaxConditionMessage whole, and no
// item is cut below minItemLength however many there are.
const (
	maxItemLength = 1024
	minItemLength = 128
)

// Format is the item as the NetworkReady message holds it when it is one of n items:
// "<label>: <reason>: <message>", the reason quoted like a name, cut to what n items of that
// length leave each in MaxConditionMessage (at most 1 KiB, at least 128 bytes). The message is
// taken as it is: vmipam writes records with messages already made safe for the condition.
func (i Item) Format(n int) string {
	bound := maxItemLength
	if n > 0 {
		bound = max(minItemLength, min(maxItemLength, (MaxConditionMessage-len("; ")*(n-1))/n))
	}
	return Truncate(fmt.Sprintf("%s: %s: %s", i.Label, QuoteName(i.Reason), i.Message), bound)
}

// NetworkReady is the VM's NetworkReady condition for items (every IPAM item and whatever
// else the virtualization controller reports per interface) of a VM with interfaces
// additional interfaces, at generation.
func NetworkReady(items []Item, interfaces int, generation int64) metav1.Condition {
	c := metav1.Condition{Type: ConditionNetworkReady, ObservedGeneration: generation}
	if len(items) == 0 {
		c.Status, c.Reason = metav1.ConditionTrue, ReasonNetworkReady
		c.Message = fmt.Sprintf("All additional network interfaces are attached (%d)", interfaces)
		return c
	}
	texts := make([]string, len(items))
	for i, it := range items {
		texts[i] = it.Format(len(items))
	}
	c.Status, c.Reason = metav1.ConditionFalse, ReasonNetworkNotReady
	c.Message = Truncate(strings.Join(texts, "; "), MaxConditionMessage)
	return c
}

// AwaitingRestart is the AwaitingRestartToApplyConfiguration condition for the interfaces
// held until the next start (labels), nil when none is.
func AwaitingRestart(held []string, generation int64) *metav1.Condition {
	if len(held) == 0 {
		return nil
	}
	return &metav1.Condition{Type: ConditionAwaitingRestart, Status: metav1.ConditionTrue,
		Reason: ReasonChangesPendingRestart, ObservedGeneration: generation,
		Message: "Changes of these interfaces apply at the next restart: " + strings.Join(held, ", ")}
}

// Label is an interface as messages show it: "<Type>/<name>" with the name through QuoteName
// (the VirtualMachine CRD accepts any spec.networks[].name).
func Label(networkType, name string) string { return networkType + "/" + QuoteName(name) }

// QuoteName is a name taken from an object (a network name, an ipAddressName, a reason) fit to
// be shown in the NetworkReady message, an event's note or a table. The API validates few such
// names, so a name can hold "; ", a line break or a bidi override and forge what surrounds it.
// A plain name (ASCII letters, digits, '-', '.', '_', as every DNS name is) is returned as it
// is; any other is Go-quoted in ASCII with ';' written as \x3b, so that it holds no separator,
// no line break and no format character, and strconv.Unquote gives the name back.
func QuoteName(s string) string {
	if plainName(s) {
		return s
	}
	return strings.ReplaceAll(strconv.QuoteToASCII(s), ";", `\x3b`)
}

// plainName: s is non-empty and every byte of it is an ASCII letter, a digit, '-', '.' or '_'.
func plainName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// Truncate returns s cut to at most max bytes, ending in "..." when cut, on a UTF-8 character
// boundary: a cut character would be stored by the API server as U+FFFD, so a condition read
// back would never equal the one computed and every reconcile would write it again.
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

package evaluator

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apiserver/pkg/cel/lazy"
)

// maxTraceValueLength bounds one variable value in a Trace, so that a large list does not
// flood a dry-run answer.
const maxTraceValueLength = 512

// formatValue renders a CEL value for Trace.Variables, as a CEL literal where there is one:
// "abc" quoted, lists [..], maps {..} with their entries sorted (so that the trace is
// deterministic), input objects as JSON. Long values are cut at maxTraceValueLength.
func formatValue(v ref.Val) string {
	s := formatCEL(v)
	if len(s) > maxTraceValueLength {
		return s[:maxTraceValueLength] + "…"
	}
	return s
}

func formatCEL(v ref.Val) string {
	switch x := v.(type) {
	case types.String:
		return strconv.Quote(string(x))
	case types.Bytes:
		return "b" + strconv.Quote(string(x))
	case types.Uint:
		return strconv.FormatUint(uint64(x), 10) + "u"
	case types.Double:
		return strconv.FormatFloat(float64(x), 'g', -1, 64)
	case types.Null:
		return "null"
	case types.Timestamp:
		return fmt.Sprintf("timestamp(%q)", x.Time.Format(time.RFC3339Nano))
	case types.Duration:
		return fmt.Sprintf("duration(%q)", x.Duration.String())
	case *lazy.MapValue:
		return "variables" // resolving it here would evaluate every variable
	case *types.Optional:
		if !x.HasValue() {
			return "optional.none()"
		}
		return "optional.of(" + formatCEL(x.GetValue()) + ")"
	case traits.Mapper:
		return formatMap(x)
	case traits.Lister:
		return formatList(x)
	}
	if rv := reflect.ValueOf(v.Value()); rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Struct {
		if b, err := json.Marshal(v.Value()); err == nil {
			return string(b)
		}
	}
	return fmt.Sprint(v.Value())
}

func formatList(l traits.Lister) string {
	var items []string
	for it := l.Iterator(); it.HasNext() == types.True; {
		items = append(items, formatCEL(it.Next()))
	}
	return "[" + strings.Join(items, ", ") + "]"
}

func formatMap(m traits.Mapper) string {
	var entries []string
	for it := m.Iterator(); it.HasNext() == types.True; {
		k := it.Next()
		entries = append(entries, formatCEL(k)+": "+formatCEL(m.Get(k)))
	}
	slices.Sort(entries)
	return "{" + strings.Join(entries, ", ") + "}"
}

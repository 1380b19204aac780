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
)

// maxTraceValueLength bounds one variable value in a Trace, so that a large list does not
// flood a dry-run answer. Formatting stops once it is reached: a list of millions of elements
// (cheap to build in CEL: `l + l` costs one unit whatever l's size) is never walked.
const maxTraceValueLength = 512

// truncated marks a value cut at maxTraceValueLength, or cut because the budget ran out.
const truncated = "…"

// formatter renders CEL values into a buffer of at most limit bytes, counting the values it
// visits (its cost, charged to the interface budget like CEL's own work).
type formatter struct {
	b strings.Builder
	// limit is the most bytes written; past it the formatter stops.
	limit int
	// visited counts the values visited, in cost units (one per value).
	visited int64
	// maxVisits stops the formatter once visited reaches it (the remaining budget).
	maxVisits int64
}

// full reports whether the formatter must stop: its buffer or its visits are exhausted.
func (f *formatter) full() bool {
	return f.b.Len() >= f.limit || f.visited >= f.maxVisits
}

// write appends s, cut at the limit.
func (f *formatter) write(s string) {
	if room := f.limit - f.b.Len(); room < len(s) {
		s = s[:max(room, 0)]
	}
	f.b.WriteString(s)
}

// formatValue renders a CEL value for Trace.Variables, as a CEL literal where there is one:
// "abc" quoted, lists [..], maps {..} with their entries sorted (so that the trace is
// deterministic), input objects as JSON. Formatting stops at maxTraceValueLength bytes, or
// once maxVisits values were visited, and the value then ends in "…". It returns the text and
// the cost of formatting it (the values visited, plus one per 64 bytes written).
func formatValue(v ref.Val, maxVisits int64) (string, int64) {
	f := &formatter{limit: maxTraceValueLength, maxVisits: maxVisits}
	f.value(v)
	s := f.b.String()
	if f.full() {
		s += truncated
	}
	return s, f.visited + int64(len(s))/64
}

func (f *formatter) value(v ref.Val) {
	if f.full() {
		return
	}
	f.visited++
	switch x := v.(type) {
	case *variables:
		f.write("variables") // resolving it here would evaluate every variable
	case *types.Optional:
		if !x.HasValue() {
			f.write("optional.none()")
			return
		}
		f.write("optional.of(")
		f.value(x.GetValue())
		f.write(")")
	case traits.Mapper:
		f.mapValue(x)
	case traits.Lister:
		f.list(x)
	default:
		f.write(scalar(v))
	}
}

// scalar renders a value that is neither a list, a map nor an optional. Input objects (small,
// bounded by input.go) are JSON.
func scalar(v ref.Val) string {
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
	}
	if rv := reflect.ValueOf(v.Value()); rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Struct {
		if b, err := json.Marshal(v.Value()); err == nil {
			return string(b)
		}
	}
	return fmt.Sprint(v.Value())
}

func (f *formatter) list(l traits.Lister) {
	f.write("[")
	for i, it := 0, l.Iterator(); it.HasNext() == types.True; i++ {
		if f.full() {
			return
		}
		if i > 0 {
			f.write(", ")
		}
		f.value(it.Next())
	}
	f.write("]")
}

// mapValue writes a map's entries sorted by their formatted keys. A map's size was paid for
// by the CEL cost of building it (CEL has no cheap map concatenation) or is bounded by the
// input, so every key is visited to sort them; the values are visited only until full.
func (f *formatter) mapValue(m traits.Mapper) {
	type entry struct {
		key string
		k   ref.Val
	}
	var entries []entry
	for it := m.Iterator(); it.HasNext() == types.True; {
		if f.visited >= f.maxVisits {
			return
		}
		k := it.Next()
		f.visited++
		key := scalar(k)
		if len(key) > f.limit {
			key = key[:f.limit]
		}
		entries = append(entries, entry{key, k})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	f.write("{")
	for i, e := range entries {
		if f.full() {
			return
		}
		if i > 0 {
			f.write(", ")
		}
		f.write(e.key + ": ")
		f.value(m.Get(e.k))
	}
	f.write("}")
}

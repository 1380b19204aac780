package evaluator

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// Bounds for strings and collections whose field carries no maxSize tag: map keys are
// qualified names (Kubernetes: 317 characters); other elements DNS-1123 names (253). A field
// may raise its elements' bound with an elemMaxSize tag (annotation values: 256 KiB, the
// API server's limit on all annotations together).
const (
	defaultKeySize  = 317
	defaultElemSize = 253
)

// sizeTag reads a numeric struct tag (maxSize, elemMaxSize); 0 when absent.
func sizeTag(f reflect.StructField, name string) uint64 {
	tag := f.Tag.Get(name)
	if tag == "" {
		return 0
	}
	v, err := strconv.ParseUint(tag, 10, 64)
	if err != nil {
		panic(fmt.Sprintf("evaluator: bad %s tag on %s: %v", name, f.Name, err))
	}
	return v
}

// fieldChecks memoizes, for one evaluation, the bounds checks of the fields checked so far:
// each field is checked at most once however many policies read it. Fields are numbered by
// their position in boundedFields (fewer than 64: a bit each).
type fieldChecks struct {
	checked, beyond uint64
	// errs are the errors of the fields beyond their bounds, by number (nil while none is).
	errs map[int]error
}

// check reports the first of fields whose value in in is beyond the bounds the static cost
// estimate assumes (the same maxSize/elemMaxSize tags, walked the same way), as "<CEL path>:
// <size>, at most <bound>"; nil when they are within them. Enforcing them is what makes
// "compiles" mean "cannot exceed the per-call limit". Only the fields a policy reads are
// checked (boundedFieldsRead), when Decide first evaluates it, so that an input beyond them
// is that policy's error; a field no expression reads costs nothing however large. A field
// already checked in this evaluation is not checked again.
func (c *fieldChecks) check(in *Input, fields []boundedField) error {
	for _, f := range fields {
		bit := uint64(1) << f.id
		if c.checked&bit == 0 {
			c.checked |= bit
			if err := f.check(reflect.ValueOf(in).Elem().FieldByIndex(f.index)); err != nil {
				c.beyond |= bit
				if c.errs == nil {
					c.errs = map[int]error{}
				}
				c.errs[f.id] = err
			}
		}
		if c.beyond&bit != 0 {
			return c.errs[f.id]
		}
	}
	return nil
}

// boundedField is a string, list or map field of Input with its bounds.
type boundedField struct {
	id          int    // its position in boundedFields, for fieldChecks
	index       []int  // the field's index sequence in Input (reflect.Value.FieldByIndex)
	path        string // its CEL path, e.g. vm.labels
	bound, elem uint64 // maxSize (0: unbounded) and the bound of each element or map value
}

// boundedFields are Input's bounded fields in declaration order, read from the tags once:
// reading them on every decision was a fifth of its time.
var boundedFields = sync.OnceValue(func() []boundedField {
	fields := collectBounded(nil, "", reflect.TypeFor[Input](), nil)
	if len(fields) > 64 {
		panic(fmt.Sprintf("evaluator: %d bounded input fields, fieldChecks holds 64", len(fields)))
	}
	for i := range fields {
		fields[i].id = i
	}
	return fields
})

// boundedFieldsRead are the bounded fields some expression reads: a read path (reads) equal
// to the field's, below it (vm.labels.team reads vm.labels) or above it (vm reads all of vm).
func boundedFieldsRead(reads map[string]bool) []boundedField {
	var out []boundedField
	for _, f := range boundedFields() {
		for r := range reads {
			if r == f.path || strings.HasPrefix(r, f.path+".") || strings.HasPrefix(f.path, r+".") {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// inputReads adds to reads the input paths e reads: the longest select chain from an input
// variable (vm.labels, interface.spec.x), or the variable itself when it is used whole (an
// argument, an optional select vm.?labels).
func inputReads(e ast.Expr, reads map[string]bool) {
	operands := map[int64]bool{}
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() == ast.SelectKind {
			operands[e.AsSelect().Operand().ID()] = true
		}
	}))
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if operands[e.ID()] {
			return
		}
		if path, ok := selectPath(e); ok {
			reads[path] = true
		}
	}))
}

// selectPath is e as a dotted path from an input variable.
func selectPath(e ast.Expr) (string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		_, input := inputVariables[e.AsIdent()]
		return e.AsIdent(), input
	case ast.SelectKind:
		p, ok := selectPath(e.AsSelect().Operand())
		return p + "." + e.AsSelect().FieldName(), ok
	}
	return "", false
}

// collectBounded appends the bounded fields of the struct type t (at index, CEL path path) to
// out, descending into the structs of this package (other structs, time.Time, are leaves).
func collectBounded(index []int, path string, t reflect.Type, out []boundedField) []boundedField {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		p, idx := name, append(slices.Clone(index), i)
		if path != "" {
			p = path + "." + name
		}
		switch f.Type.Kind() {
		case reflect.Struct:
			if f.Type.PkgPath() == t.PkgPath() {
				out = collectBounded(idx, p, f.Type, out)
			}
		case reflect.Map:
			if f.Type != reflect.TypeFor[map[string]string]() {
				panic(fmt.Sprintf("evaluator: input field %s: only map[string]string maps are bounded", p))
			}
			fallthrough
		case reflect.String, reflect.Slice:
			out = append(out, boundedField{index: idx, path: p, bound: sizeTag(f, "maxSize"),
				elem: cmpOr(sizeTag(f, "elemMaxSize"), defaultElemSize)})
		}
	}
	return out
}

// check reports v, the value of f, beyond f's bounds. It builds an element's path only for
// the error: a decision within bounds allocates nothing here.
func (f boundedField) check(v reflect.Value) error {
	switch v.Kind() {
	case reflect.String:
		return within(f.path, "characters", v.Len(), f.bound)
	case reflect.Slice:
		if err := within(f.path, "entries", v.Len(), f.bound); err != nil {
			return err
		}
		for i := range v.Len() {
			if n := v.Index(i).Len(); beyond(n, f.elem) {
				return within(fmt.Sprintf("%s[%d]", f.path, i), "characters", n, f.elem)
			}
		}
	case reflect.Map:
		m := v.Interface().(map[string]string)
		if err := within(f.path, "entries", len(m), f.bound); err != nil {
			return err
		}
		for k, val := range m {
			if beyond(len(k), defaultKeySize) {
				return within(f.path+" key "+strconv.Quote(truncate(k)), "characters", len(k), defaultKeySize)
			}
			if beyond(len(val), f.elem) {
				return within(f.path+"["+truncate(k)+"]", "characters", len(val), f.elem)
			}
		}
	}
	return nil
}

// beyond: n exceeds bound (0: unbounded).
func beyond(n int, bound uint64) bool { return bound > 0 && uint64(n) > bound }

func within(path, unit string, n int, bound uint64) error {
	if beyond(n, bound) {
		return fmt.Errorf("%s: %d %s, at most %d", path, n, unit, bound)
	}
	return nil
}

// truncate is s cut to 64 bytes (see cut), for quoting an input value in an error.
func truncate(s string) string { return cut(s, 64) }

// cut is s cut to at most max bytes followed by "…" when longer, on a UTF-8 character boundary
// (a cut character would be invalid UTF-8 in a message, an event or the JSON of a trace).
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func cmpOr(a, b uint64) uint64 {
	if a != 0 {
		return a
	}
	return b
}

// maxSizeWalk bounds the values sizeWithin visits: a fixed variable bound (1,024 entries of
// at most 317 elements) holds at most 325,632 values over two levels. The walk must be bounded
// by a count, not by the charge: a value that reuses one inner list (.map(x, [x, x])) holds
// 2^k values for a cost of ~k (issue #15).
const maxSizeWalk = 1 << 19

// walkValuesPerUnit is how many values sizeWithin visits per cost unit charged: a visit is a
// type switch and a size read (~30 ns on the reference machine), so ten of them cost about
// what a unit of the constructs the budgets are calibrated on costs (limits.go), as cel-go
// charges ten characters of a string traversal a unit.
const walkValuesPerUnit = 10

// walkCharge is the charge of a walk that visited n values.
func walkCharge(n uint64) uint64 { return (n + walkValuesPerUnit - 1) / walkValuesPerUnit }

// errWalkUnpaid stops a walk that reached the values its caller could pay for (sizeWithin's
// allowance) before it could decide.
var errWalkUnpaid = errors.New("the walk reached the values its allowance pays for")

// sizeWithin checks v's size against bound and its elements' (at any depth) against elem,
// visiting at most maxSizeWalk values (past them, the value is beyond the bound) and at most
// allowance (past them: errWalkUnpaid, when fewer than maxSizeWalk). It returns the values it
// visited, for its caller to charge (walkCharge).
func sizeWithin(v ref.Val, bound, elem, allowance uint64) (uint64, error) {
	w := sizeWalk{left: min(allowance, maxSizeWalk)}
	err := w.within(v, bound, elem)
	if errors.Is(err, errWalkStopped) {
		err = fmt.Errorf("more than %d values counting nested lists and maps", maxSizeWalk)
		if allowance < maxSizeWalk {
			err = errWalkUnpaid
		}
	}
	return w.visited, err
}

// errWalkStopped: the walk visited all the values it may.
var errWalkStopped = errors.New("walk stopped")

// sizeWalk is one sizeWithin walk: the values it may still visit and those it visited.
type sizeWalk struct {
	left, visited uint64
}

// within checks v as sizeWithin does, one visit for v and one for each element, key and
// value it nests. A string is measured in bytes, as the estimate sizes it and the charges
// count it: in characters, 317 four-byte ones (1,268 bytes) passed a bound of 317 and a
// search of two such strings was charged 160,326 units against the 100,000 its estimate
// admitted (issue #15, tester atk11 finding 2).
func (w *sizeWalk) within(v ref.Val, bound, elem uint64) error {
	if w.left == 0 {
		return errWalkStopped
	}
	w.left--
	w.visited++
	var n uint64
	unit := "entries"
	switch x := v.(type) {
	case types.String:
		n, unit = uint64(len(x)), "bytes"
	case types.Bytes:
		n, unit = uint64(len(x)), "bytes"
	case traits.Mapper:
		n = uint64(x.Size().(types.Int))
		if n <= bound {
			for it := x.Iterator(); it.HasNext() == types.True; {
				k := it.Next()
				if err := w.within(k, elem, elem); err != nil {
					return err
				}
				if err := w.within(x.Get(k), elem, elem); err != nil {
					return err
				}
			}
		}
	case traits.Lister:
		n = uint64(x.Size().(types.Int))
		if n <= bound {
			for it := x.Iterator(); it.HasNext() == types.True; {
				if err := w.within(it.Next(), elem, elem); err != nil {
					return err
				}
			}
		}
	default:
		return nil
	}
	if n > bound {
		return fmt.Errorf("%d %s, at most %d", n, unit, bound)
	}
	return nil
}

package cost

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/cel-go/common/ast"
)

// Input bounds: the maxSize tag of an input field bounds a string's characters or a list's or
// map's entries, elemMaxSize (default DefaultElemSize) each element or map value, and a map's
// keys are qualified names (DefaultKeySize). The estimate assumes them; Checks enforces them
// at run time on the fields a policy reads, so that no input beyond them reaches a policy.
const (
	DefaultKeySize  = 317
	DefaultElemSize = 253
)

// Field is a bounded string, list or map field of the input.
type Field struct {
	id          int    // its position in Bounds, for Checks
	index       []int  // the field's index sequence in the input (reflect.Value.FieldByIndex)
	path        string // its CEL path, e.g. vm.labels
	bound, elem uint64 // maxSize (0: unbounded) and the bound of each element or map value
}

// Is reports whether f and g are the same field.
func (f Field) Is(g Field) bool { return f.id == g.id }

// Bounds are the bounded fields of an input type, read from its tags once.
type Bounds struct {
	fields []Field
}

// NewBounds reads the bounds of the input struct type t: its string, slice and
// map[string]string fields, in the structs of t's package at any depth (at most 64).
func NewBounds(t reflect.Type) (*Bounds, error) {
	fields, err := collectBounded(nil, "", t, nil)
	if err != nil {
		return nil, err
	}
	if len(fields) > 64 {
		return nil, fmt.Errorf("%d bounded input fields, Checks holds 64", len(fields))
	}
	for i := range fields {
		fields[i].id = i
	}
	return &Bounds{fields: fields}, nil
}

// Read are the bounded fields some read path (Config.InputReads) reads: one equal to the
// field's, below it (vm.labels.team reads vm.labels) or above it (vm reads all of vm).
func (b *Bounds) Read(reads map[string]bool) []Field {
	var out []Field
	for _, f := range b.fields {
		for r := range reads {
			if r == f.path || strings.HasPrefix(r, f.path+".") || strings.HasPrefix(f.path, r+".") {
				out = append(out, f)
				break
			}
		}
	}
	return out
}

// Checks memoizes, for one evaluation, the checks of the fields checked so far: each field is
// checked at most once however many policies read it.
type Checks struct {
	checked, beyond uint64
	// errs are the errors of the fields beyond their bounds, by id (nil while none is).
	errs map[int]error
}

// Check reports the first of fields whose value in in (a pointer to the input struct) is
// beyond its bounds, as "<CEL path>: <size>, at most <bound>"; nil when all are within.
func (c *Checks) Check(in any, fields []Field) error {
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

// check reports v, the value of f, beyond f's bounds; the smallest offending map key when
// several are, so that the error is the same every run. It builds a path only for the error.
func (f Field) check(v reflect.Value) error {
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
		var bad []string
		for k, val := range m {
			if beyond(len(k), DefaultKeySize) || beyond(len(val), f.elem) {
				bad = append(bad, k)
			}
		}
		if len(bad) == 0 {
			return nil
		}
		k := slices.Min(bad)
		if beyond(len(k), DefaultKeySize) {
			return within(f.path+" key "+strconv.Quote(truncate(k)), "characters", len(k), DefaultKeySize)
		}
		return within(f.path+"["+truncate(k)+"]", "characters", len(m[k]), f.elem)
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

// collectBounded appends the bounded fields of the struct type t (at index, CEL path path) to
// out, descending into the structs of t's package (other structs, time.Time, are leaves).
func collectBounded(index []int, path string, t reflect.Type, out []Field) ([]Field, error) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		p, idx := name, append(slices.Clone(index), i)
		if path != "" {
			p = path + "." + name
		}
		bound, elem, err := tags(f)
		if err != nil {
			return nil, err
		}
		switch f.Type.Kind() {
		case reflect.Struct:
			if f.Type.PkgPath() == t.PkgPath() {
				if out, err = collectBounded(idx, p, f.Type, out); err != nil {
					return nil, err
				}
			}
		case reflect.Map:
			if f.Type != reflect.TypeFor[map[string]string]() {
				return nil, fmt.Errorf("input field %s: only map[string]string maps are bounded", p)
			}
			out = append(out, Field{index: idx, path: p, bound: bound, elem: elem})
		case reflect.String, reflect.Slice:
			out = append(out, Field{index: idx, path: p, bound: bound, elem: elem})
		}
	}
	return out, nil
}

// tags reads f's maxSize (0 when absent) and elemMaxSize (DefaultElemSize when absent).
func tags(f reflect.StructField) (bound, elem uint64, err error) {
	read := func(name string, absent uint64) (uint64, error) {
		tag := f.Tag.Get(name)
		if tag == "" {
			return absent, nil
		}
		v, err := strconv.ParseUint(tag, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad %s tag on %s: %w", name, f.Name, err)
		}
		return v, nil
	}
	if bound, err = read("maxSize", 0); err != nil {
		return 0, 0, err
	}
	elem, err = read("elemMaxSize", DefaultElemSize)
	return bound, elem, err
}

// walkInput follows steps (JSON field names, then @items, @values or @keys) from the input
// variable steps[0] through the Go types; it returns the type reached and its size bound (0:
// none declared), false when a step does not exist.
func (c Config) walkInput(steps []string) (reflect.Type, uint64, bool) {
	if len(steps) == 0 {
		return nil, 0, false
	}
	t, ok := c.Fields()[steps[0]]
	if !ok {
		return nil, 0, false
	}
	bound, elem := uint64(0), uint64(DefaultElemSize)
	for _, step := range steps[1:] {
		switch step {
		case "@items", "@values":
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Map {
				return nil, 0, false
			}
			t, bound = t.Elem(), elem
		case "@keys":
			if t.Kind() != reflect.Map {
				return nil, 0, false
			}
			t, bound = t.Key(), DefaultKeySize
		default:
			f, found := fieldByJSONName(t, step)
			if !found {
				return nil, 0, false
			}
			var err error
			if bound, elem, err = tags(f); err != nil {
				return nil, 0, false
			}
			t = f.Type
		}
	}
	return t, bound, true
}

// fieldByJSONName is the field of struct type t whose JSON name is name.
func fieldByJSONName(t reflect.Type, name string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// InputReads adds to reads the input paths e reads: the longest select chain from an input
// variable (vm.labels, interface.spec.x), or the variable itself when it is used whole (an
// argument, an optional select vm.?labels).
func (c Config) InputReads(e ast.Expr, reads map[string]bool) {
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
		if path, ok := c.selectPath(e); ok {
			reads[path] = true
		}
	}))
}

// selectPath is e as a dotted path from an input variable.
func (c Config) selectPath(e ast.Expr) (string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		_, input := c.Fields()[e.AsIdent()]
		return e.AsIdent(), input
	case ast.SelectKind:
		p, ok := c.selectPath(e.AsSelect().Operand())
		return p + "." + e.AsSelect().FieldName(), ok
	}
	return "", false
}

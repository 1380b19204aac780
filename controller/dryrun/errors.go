package dryrun

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// InvalidError is a request that cannot be evaluated: not JSON or YAML, failing validation,
// or carrying a candidate policy that does not compile. Errs has the JSON path of every
// problem within the request body, e.g. vm.spec.networks[1].type or
// policies[0].spec.skipRules[0].expression.
type InvalidError struct {
	Errs field.ErrorList
}

// Error lists every problem, separated by "; ".
func (e *InvalidError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// invalid wraps errs into an *InvalidError, or returns nil when there are none.
func invalid(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return &InvalidError{Errs: errs}
}

// under re-roots errors reported relative to an object (spec.x) below path (policies[0]).
func under(path *field.Path, errs field.ErrorList) field.ErrorList {
	out := make(field.ErrorList, 0, len(errs))
	for _, e := range errs {
		c := *e
		c.Field = join(pathString(path), e.Field)
		out = append(out, &c)
	}
	return out
}

func join(prefix, rest string) string {
	switch {
	case prefix == "":
		return rest
	case rest == "":
		return prefix
	case strings.HasPrefix(rest, "["):
		return prefix + rest
	}
	return prefix + "." + rest
}

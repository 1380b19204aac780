package cost

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// Time-zone names. cel-go's timestamp accessors given a zone (ts.getHours('Europe/Berlin'))
// call time.LoadLocation on every call (common/types/timestamp.go, timeZone), which reads a
// file: one that is not a zone (Debian's 114 KB tzdata.zi) is read whole and parsed before it
// is refused. So what loading a name gave (a zone or an error) is kept once per process, and
// a name that did not load fails before cel-go loads it again; a name longer than maxZoneName
// is no zone and is refused unread.

// maxZoneName bounds the bytes of a time-zone name: the longest IANA name with its
// "right/" or "posix/" directory is 38 ("right/America/Argentina/ComodRivadavia").
const maxZoneName = 64

// maxZoneNames bounds the names zoneChecks keeps (~600 zones exist): past it one kept
// result is dropped for each new name, so a policy cycling through more distinct names
// than this loads a bad file again at most once a cycle.
const maxZoneNames = 1024

// zoneChecks is what loading each time-zone name gave, nil for a zone. Safe for concurrent use.
type zoneChecks struct {
	// load loads a zone: time.LoadLocation, as cel-go does.
	load    func(name string) (*time.Location, error)
	mu      sync.Mutex
	results map[string]error
}

// zones are the process's zone checks: a zone loads the same for every policy.
var zones = &zoneChecks{load: time.LoadLocation, results: map[string]error{}}

// check returns why name is not a time zone cel-go can load, or nil. The error is the same
// text every time for a name (it is part of a decision's message).
func (z *zoneChecks) check(name string) error {
	if len(name) > maxZoneName {
		return fmt.Errorf("time zone name of %d bytes, at most %d", len(name), maxZoneName)
	}
	z.mu.Lock()
	err, ok := z.results[name]
	z.mu.Unlock()
	if ok {
		return err
	}
	if _, loadErr := z.load(name); loadErr != nil {
		err = fmt.Errorf("%s is not a time zone", strconv.Quote(name))
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if len(z.results) >= maxZoneNames {
		for k := range z.results { // any one: Go's map order
			delete(z.results, k)
			break
		}
	}
	z.results[name] = err
	return err
}

// zoneOverloads are the timestamp accessors that take a time zone (cel-go's standard
// library), by function name.
var zoneOverloads = map[string]string{
	overloads.TimeGetFullYear: overloads.TimestampToYearWithTz, overloads.TimeGetMonth: overloads.TimestampToMonthWithTz,
	overloads.TimeGetDayOfYear: overloads.TimestampToDayOfYearWithTz, overloads.TimeGetDayOfMonth: overloads.TimestampToDayOfMonthZeroBasedWithTz,
	overloads.TimeGetDate: overloads.TimestampToDayOfMonthOneBasedWithTz, overloads.TimeGetDayOfWeek: overloads.TimestampToDayOfWeekWithTz,
	overloads.TimeGetHours: overloads.TimestampToHoursWithTz, overloads.TimeGetMinutes: overloads.TimestampToMinutesWithTz,
	overloads.TimeGetSeconds: overloads.TimestampToSecondsWithTz, overloads.TimeGetMilliseconds: overloads.TimestampToMillisecondsWithTz,
}

// zoneGuards are the callGuards of the accessors in zoneOverloads, by function name.
func zoneGuards() []callGuard {
	var out []callGuard
	for _, function := range slices.Sorted(maps.Keys(zoneOverloads)) {
		out = append(out, callGuard{function: function, overloads: []string{zoneOverloads[function]}, check: zoneArg})
	}
	return out
}

// zoneArg checks the time zone an accessor is given (args[1]): a name (cel-go reads one
// without ':' as a name; with one, as an offset it parses) must load as a zone.
func zoneArg(_ Config, args []ref.Val) error {
	if len(args) < 2 {
		return nil
	}
	tz, ok := args[1].(types.String)
	if !ok || strings.Contains(string(tz), ":") {
		return nil
	}
	return zones.check(string(tz))
}

// literalZoneErrors reports, for an expression being written, each accessor given a
// literal time-zone name that does not load: it fails whenever it is evaluated.
func literalZoneErrors(e ast.Expr) []string {
	var out []string
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind {
			return
		}
		call := e.AsCall()
		if _, ok := zoneOverloads[call.FunctionName()]; !ok || !call.IsMemberFunction() || len(call.Args()) != 1 {
			return
		}
		tz, ok := literalString(call.Args()[0])
		if !ok || strings.Contains(tz, ":") {
			return
		}
		if err := zones.check(tz); err != nil {
			out = append(out, fmt.Sprintf("%s(): %v: name an IANA zone (Europe/Berlin) or give an offset (+02:00)", call.FunctionName(), err))
		}
	}))
	return out
}

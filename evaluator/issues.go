package evaluator

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
)

// maxReportedIssues is how many of an expression's parse or type errors issuesError
// reports; the rest are counted. The first errors are the ones an author fixes first.
const maxReportedIssues = 5

// snippetRunes is how many characters of the source line issuesError shows on each side of
// an error's column.
const snippetRunes = 40

// failed: iss holds errors. Unlike iss.Err() != nil, it formats nothing.
func failed(iss *cel.Issues) bool { return len(iss.Errors()) > 0 }

// issuesError is iss, the errors of parsing or checking src, as one error that is cheap to
// build and to read: at most maxReportedIssues errors in cel-go's layout ("ERROR:
// <input>:line:column: message", then the source around the column and a caret under it),
// the source cut to snippetRunes characters each side, each message cut to 256 bytes, and
// how many more there are. nil when iss holds no error.
//
// cel-go's Issues.Err() formats every error (up to 100) with its whole source line (up to
// 16 KiB) into one string, megabytes for a policy of long lines with an error per term: the
// webhook's answer is work no bound counts, so it is bounded here.
func issuesError(src string, iss *cel.Issues) error {
	errs := iss.Errors()
	if len(errs) == 0 {
		return nil
	}
	lines := strings.Split(src, "\n")
	var b strings.Builder
	for i, e := range errs {
		if i == maxReportedIssues {
			fmt.Fprintf(&b, "\n(%d more errors)", len(errs)-i)
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		line, col := e.Location.Line(), e.Location.Column()
		fmt.Fprintf(&b, "ERROR: <input>:%d:%d: %s", line, col+1, cut(e.Message, 256))
		if line >= 1 && line <= len(lines) {
			snippet, caret := window([]rune(lines[line-1]), col)
			fmt.Fprintf(&b, "\n | %s\n | %s^", snippet, strings.Repeat(".", caret))
		}
	}
	return errors.New(b.String())
}

// window is the part of line within snippetRunes characters of col (tabs shown as spaces),
// with "…" where it was cut, and the column of col in it.
func window(line []rune, col int) (string, int) {
	col = min(max(col, 0), len(line))
	from, to := max(col-snippetRunes, 0), min(col+snippetRunes, len(line))
	s := strings.ReplaceAll(string(line[from:to]), "\t", " ")
	caret := col - from
	if from > 0 {
		s, caret = "…"+s, caret+1
	}
	if to < len(line) {
		s += "…"
	}
	return s, caret
}

// tooDeep: the parser gave up on an expression nested past its recursion limit.
func tooDeep(iss *cel.Issues) bool {
	for _, e := range iss.Errors() {
		if strings.Contains(e.Message, "recursion limit exceeded") || strings.Contains(e.Message, "max recursion depth exceeded") {
			return true
		}
	}
	return false
}

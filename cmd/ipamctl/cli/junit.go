package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/jstemmer/go-junit-report/v2/junit"
)

// Output formats of test: the human summary, or a JUnit XML report for CI systems (GitLab,
// Jenkins, GitHub test reporters), one <testsuite> per suite file and one <testcase> per case.
const (
	outputText  = "text"
	outputJUnit = "junit"
)

func checkTestOutput(format string) error {
	if format == outputText || format == outputJUnit {
		return nil
	}
	return usageError{fmt.Errorf("--output %q: must be text or junit", format)}
}

// runJUnit runs every suite file and writes the JUnit report to w. A failed case is a
// <failure> with one line per difference; a suite that cannot be run is one <error> case. It
// returns errReported when anything failed, like the text output.
func runJUnit(ctx context.Context, w io.Writer, r suiteRunner, files []string) error {
	report := junit.Testsuites{Name: "ipamctl test"}
	for i, f := range files {
		suite := junitSuite(ctx, r, f)
		suite.ID = i
		report.AddSuite(suite)
	}
	if err := report.WriteXML(w); err != nil {
		return err
	}
	if report.Failures > 0 || report.Errors > 0 {
		return errReported
	}
	return nil
}

func junitSuite(ctx context.Context, r suiteRunner, file string) junit.Testsuite {
	suite := junit.Testsuite{Name: file, File: file}
	results, err := r.runFile(ctx, file)
	if err != nil {
		suite.AddTestcase(junit.Testcase{Name: file, Classname: file,
			Error: &junit.Result{Message: "the suite cannot be run", Data: strings.TrimPrefix(err.Error(), file+": ")}})
		return suite
	}
	for _, r := range results {
		tc := junit.Testcase{Name: r.Name, Classname: file}
		if !r.Passed() {
			tc.Failure = &junit.Result{Message: fmt.Sprintf("%d expectation(s) did not hold", len(r.Diffs)),
				Data: strings.Join(r.Diffs, "\n")}
		}
		suite.AddTestcase(tc)
	}
	return suite
}

package scale

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAppendSectionKeepsSectionsBeforeTheReading(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	must(t, os.WriteFile(path, []byte("# title\n\n## Reading\n\nprose\n"), 0o644))
	must(t, appendSection(path, 1000, "first 1000\n"))
	must(t, appendSection(path, 10000, "only 10000\n"))
	must(t, appendSection(path, 1000, "second 1000\n"))
	data, err := os.ReadFile(path)
	must(t, err)
	text := string(data)
	order := []string{"# title", "second 1000", "only 10000", "## Reading", "prose"}
	at := -1
	for _, s := range order {
		i := strings.Index(text, s)
		if i <= at {
			t.Fatalf("%q is missing or out of order in:\n%s", s, text)
		}
		at = i
	}
	if strings.Contains(text, "first 1000") || strings.Count(text, "<!-- N=1000 -->") != 1 {
		t.Errorf("the second N=1000 report did not replace the first:\n%s", text)
	}
}

func TestByVerbGivesMediansPerVMWithoutThePolicyStartUp(t *testing.T) {
	run := func(creates, patches int) result {
		return result{N: 10, Writes: writeCount{Issued: map[string]int{
			"create ipaddresses": creates, "patch pods": patches, "patch clusteripampolicies": 1}}}
	}
	got := byVerb([]result{run(20, 10), run(22, 9), run(21, 30)})
	if want := "create ipaddresses 2.10, patch pods 1.00"; got != want {
		t.Errorf("byVerb = %q, want %q", got, want)
	}
}

func TestThePolicyChangeRowsAreMediansOfTheRunsChanges(t *testing.T) {
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	r := result{N: 1000,
		Changes: []policyChange{{Target: 10, Time: ms(300)}, {Target: 10, Time: ms(100)}, {Target: 10, Time: ms(900)}},
		Floor:   systemFloor{FanOuts: []fanOutFloor{{All: ms(50)}, {All: ms(100)}, {All: ms(25)}}}}
	report := renderReport(1000, []result{r}, "")
	if want := "**6.00×** (0.30 s vs 0.05 s)"; !strings.Contains(report, want) {
		t.Errorf("policy change row: want the median change over the median floor, %q, in:\n%s", want, report)
	}
	if want := "| 6.00×, 1.00×, 36.00× |"; !strings.Contains(report, want) {
		t.Errorf("each change's row: want each change over its own floor, %q, in:\n%s", want, report)
	}
}

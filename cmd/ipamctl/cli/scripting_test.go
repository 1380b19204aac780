package cli_test

import (
	"encoding/xml"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/cmd/ipamctl/cli"
)

// evaluateArgs evaluates the test VM against the test world.
var evaluateArgs = []string{"evaluate", "-f", "testdata/vm.yaml", "-O", "testdata/world.yaml", "--assume-ready"}

func TestEvaluateJSONPathPrintsWhatTheTemplateSelects(t *testing.T) {
	code, out, errOut := run(t, "ipamctl", append(evaluateArgs,
		"-o", `jsonpath={.status.vm.name}{range .status.interfaces[*]}{" "}{.type}/{.name}={.decision.allocation}{end}`)...)
	if want := "web ClusterNetwork/corp=Auto ClusterNetwork/corp-static=Static"; code != 0 || out != want {
		t.Errorf("exit %d, output %q (%s), want %q", code, out, errOut, want)
	}
}

func TestEvaluateJSONPathSeesSeveralResultsAsAList(t *testing.T) {
	code, out, errOut := run(t, "ipamctl", "evaluate", "-f", "testdata/vm.yaml", "-f", "testdata/vm.yaml", "-O", "testdata/world.yaml",
		"--assume-ready", "-o", `jsonpath={.kind}:{.items[*].status.vm.name}`)
	if want := "List:web web"; code != 0 || out != want {
		t.Errorf("exit %d, output %q (%s), want %q", code, out, errOut, want)
	}
}

func TestEvaluateNamePrintsTheVMsAsKubectlDoes(t *testing.T) {
	code, out, errOut := run(t, "ipamctl", append(evaluateArgs, "-o", "name")...)
	if want := "virtualmachine.virtualization.deckhouse.io/web\n"; code != 0 || out != want {
		t.Errorf("exit %d, output %q (%s), want %q", code, out, errOut, want)
	}
}

func TestABrokenTemplateIsAUsageError(t *testing.T) {
	code, _, errOut := run(t, "ipamctl", append(evaluateArgs, "-o", "jsonpath={.status.vm.name")...)
	if code != 2 || !strings.Contains(errOut, "jsonpath") {
		t.Errorf("exit %d, error output %q, want 2 and the jsonpath problem", code, errOut)
	}
}

func TestRecursiveReadsSubdirectories(t *testing.T) {
	flat := []string{"evaluate", "-f", "testdata/vm.yaml", "-O", "testdata/nested", "--assume-ready", "-o", "jsonpath={.status.interfaces[0].reason}"}
	if code, out, _ := run(t, "ipamctl", flat...); code != 0 || out != "NetworkNotFound" {
		t.Fatalf("without -R: exit %d, first interface %q; want NetworkNotFound (the world is not read)", code, out)
	}
	code, out, errOut := run(t, "ipamctl", append(flat, "-R")...)
	if code != 0 || out != "IPAddressPending" {
		t.Errorf("with -R: exit %d, first interface's reason %q (%s); want IPAddressPending: the nested network exists, its new Auto address waits for SDN", code, out, errOut)
	}
}

func TestTestWritesJUnitForCI(t *testing.T) {
	code, out, errOut := run(t, "ipamctl", "test", "-o", "junit", "testdata/wrong-expectation.yaml", "testdata/typo-expectation.yaml")
	var report struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Data string `xml:",cdata"`
				} `xml:"failure"`
				Error *struct {
					Data string `xml:",cdata"`
				} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("not JUnit XML: %v\n%s%s", err, out, errOut)
	}
	if code != 1 || report.Tests != 3 || report.Failures != 1 || report.Errors != 1 || len(report.Suites) != 2 {
		t.Fatalf("exit %d, report %+v; want exit 1, 3 cases: 1 failed, 1 error\n%s", code, report, out)
	}
	failed := report.Suites[0].Cases[1]
	if failed.Name != "a static address is accepted (wrong on purpose)" || failed.Failure == nil ||
		!strings.Contains(failed.Failure.Data, `reason: got "StaticNotAllowed", want ""`) {
		t.Errorf("failed case %+v, want its name and one line per difference", failed)
	}
	if broken := report.Suites[1].Cases[0]; broken.Error == nil || !strings.Contains(broken.Error.Data, `unknown field "expect.rulee"`) {
		t.Errorf("the suite that cannot run: %+v, want an error naming the field", broken)
	}
}

func TestKubectlCompletesThePluginThroughTheShim(t *testing.T) {
	code, out, errOut := run(t, cli.CompletionShim, "ev")
	if code != 0 || !strings.HasPrefix(out, "evaluate\t") {
		t.Errorf("exit %d, output %q (%s), want the evaluate command completed", code, out, errOut)
	}
	code, out, _ = run(t, cli.CompletionShim, "evaluate", "-o", "")
	for _, want := range []string{"table", "json", "name", "jsonpath="} {
		if code != 0 || !strings.Contains(out, want+"\n") {
			t.Errorf("-o completes to %q, lacks %q", out, want)
		}
	}
}

func TestVersionPrintsTheStampedVersion(t *testing.T) {
	saved := cli.Version
	defer func() { cli.Version = saved }()
	cli.Version = "v9.9.9-test"
	code, out, errOut := run(t, "ipamctl", "version", "--client")
	if code != 0 || !strings.HasPrefix(out, "ipamctl v9.9.9-test (go") {
		t.Errorf("exit %d, output %q (%s), want the stamped version", code, out, errOut)
	}
}

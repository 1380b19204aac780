package sandbox_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vmipam/vmipam/test/sandbox"
)

// TestSandboxOnce runs what `make demo` runs, with --once, and checks the final table: the
// README's first command must keep working.
func TestSandboxOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	stderr := captureStderr(t)
	if err := sandbox.Run(ctx, &out, sandbox.Options{Once: true, Dir: t.TempDir(), Timeout: 90 * time.Second}); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	// client-go and k8s.io/apiserver log through klog; the sandbox routes it into the
	// controller's log file, so nothing comes between the tables on the terminal.
	if klogLines := regexp.MustCompile(`(?m)^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ .*$`).FindAllString(stderr(), -1); len(klogLines) > 0 {
		t.Errorf("klog lines reach the terminal:\n%s", strings.Join(klogLines, "\n"))
	}
	final := out.String()[strings.LastIndex(out.String(), "After creating late-ip"):]
	for _, want := range []string{
		`web\s+ClusterNetwork/corp\s+Auto\s+web-cn-corp-[a-z2-7]{6}\s+10\.10\.0\.\d+\s+-`,
		`web\s+Network/lan\s+Auto\s+web-n-lan-[a-z2-7]{6}\s+192\.168\.50\.\d+\s+-`,
		`db\s+ClusterNetwork/corp\s+Static\s+db-ip\s+10\.10\.0\.100\s+-`,
		`backup\s+ClusterNetwork/storage\s+None \(L2\)\s+-\s+-\s+-`,
		`broken\s+ClusterNetwork/corp\s+-\s+-\s+-\s+IPAddressNotFound`,
		`broken\s+ClusterNetwork/storage\s+None \(L2\)`,
		`late\s+ClusterNetwork/corp\s+Static\s+late-ip\s+10\.10\.0\.150\s+-`,
		`broken\s+False\s+ClusterNetwork/corp: IPAddressNotFound: IPAddress missing-ip does not exist`,
		`late\s+True`,
	} {
		if !regexp.MustCompile(want).MatchString(final) {
			t.Errorf("final table lacks %q:\n%s", want, final)
		}
	}
	dryRun := out.String()[strings.LastIndex(out.String(), "Dry run through the API server"):]
	for _, want := range []string{
		`VirtualMachine demo/web \(exists\); policies \(installed\): default`,
		`ClusterNetwork/corp\s+Static\s+no\s+db-ip\s+-\s+IPAddressInUse\s+yes\s+default\s+default/static-held-by-another-vm\s+default`,
		`delete IPAddress web-cn-corp-[a-z2-7]{6}`,
	} {
		if !regexp.MustCompile(want).MatchString(dryRun) {
			t.Errorf("the dry run through the API server lacks %q:\n%s", want, dryRun)
		}
	}
	editor := ""
	if i := strings.LastIndex(out.String(), "as a namespace editor"); i >= 0 {
		editor = out.String()[i:]
	}
	for _, want := range []string{
		`kubectl --kubeconfig \S+ --as demo-editor create -f \S+web-evaluation.yaml -o yaml`,
		`ClusterNetwork/corp: attached=false IPAddressInUse`,
		`status.omitted: trace, cost and policies.order omitted: requires list clusteripampolicies`,
	} {
		if !regexp.MustCompile(want).MatchString(editor) {
			t.Errorf("the editor's dry run lacks %q:\n%s", want, editor)
		}
	}
	podOf := regexp.MustCompile(`late\s+ClusterNetwork/corp\s.*\s(virt-launcher-late-\S+)`)
	before := podOf.FindStringSubmatch(out.String())
	after := podOf.FindStringSubmatch(final)
	if before == nil || after == nil || before[1] != after[1] {
		t.Errorf("VM late's launcher pod changed across the hotplug: %v → %v", before, after)
	}
}

// captureStderr sends os.Stderr to a file until the test ends and returns a function that
// reads what was written so far.
func captureStderr(t *testing.T) func() string {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	orig := os.Stderr
	os.Stderr = f
	t.Cleanup(func() { os.Stderr = orig; _ = f.Close() })
	return func() string {
		data, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
}

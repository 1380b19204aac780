package sandbox_test

import (
	"bytes"
	"context"
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
	if err := sandbox.Run(ctx, &out, sandbox.Options{Once: true, Dir: t.TempDir(), Timeout: 90 * time.Second}); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
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
		`ClusterNetwork/corp\s+Static\s+no\s+db-ip\s+-\s+default\s+\S+\s+IPAddressInUse`,
		`delete IPAddress web-cn-corp-[a-z2-7]{6}`,
	} {
		if !regexp.MustCompile(want).MatchString(dryRun) {
			t.Errorf("the dry run through the API server lacks %q:\n%s", want, dryRun)
		}
	}
	podOf := regexp.MustCompile(`late\s+ClusterNetwork/corp\s.*\s(virt-launcher-late-\S+)`)
	before := podOf.FindStringSubmatch(out.String())
	after := podOf.FindStringSubmatch(final)
	if before == nil || after == nil || before[1] != after[1] {
		t.Errorf("VM late's launcher pod changed across the hotplug: %v → %v", before, after)
	}
}

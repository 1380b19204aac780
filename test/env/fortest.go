package env

import (
	"testing"

	"github.com/vmipam/vmipam/test/crds"
)

// StartThirdParty starts a control plane with the third-party CRDs (SDN's and the
// virtualization controller's, crds.ThirdParty) for one test (StartForTest).
func StartThirdParty(t testing.TB) *Environment {
	t.Helper()
	third, err := crds.ThirdParty()
	if err != nil {
		t.Fatal(err)
	}
	return StartForTest(t, Options{CRDs: third})
}

// StartForTest starts a control plane with opts for one test, stopped when it ends; it skips
// the test under -short. Failing to start fails the test.
func StartForTest(t testing.TB, opts Options) *Environment {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	e, err := Start(opts)
	t.Cleanup(func() {
		if e != nil {
			_ = e.Stop()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

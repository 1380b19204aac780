package evaluator

import (
	"math"
	"net/url"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	apiservercel "k8s.io/apiserver/pkg/cel"
)

// partsDeep is what the estimate charges a Semver or URL a collection or optional holds;
// deepSize is what the run time walks. The bound must hold for every text of a length, the
// densest first: one-character identifiers, pre-release and build both.
func TestPartsDeepBoundsTheRunTimeWalk(t *testing.T) {
	ids := func(n int, id string) string { return strings.TrimSuffix(strings.Repeat(id+".", n), ".") }
	for _, text := range []string{
		"1.0.0", "0.0.0-a", "1.0.0-" + ids(500, "a"), "1.0.0-" + ids(500, "0"), "1.0.0+" + ids(500, "b"),
		"1.0.0-" + ids(250, "a") + "+" + ids(250, "b"), "10.20.30-x.7.z.92+meta.1",
	} {
		v, err := semver.Parse(text)
		if err != nil {
			t.Fatalf("%.30s: %v", text, err)
		}
		sv := apiservercel.Semver{Version: v}
		checkPartsDeep(t, apiservercel.SemverType, sv, uint64(len(text)), text)
	}
	for _, text := range []string{"https://a", "https://u:p@h:8080/p/q?k=v&k2=v2#frag", "mailto:x@y"} {
		u, err := url.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		checkPartsDeep(t, apiservercel.URLType, apiservercel.URL{URL: u}, uint64(len(text)), text)
	}
}

func checkPartsDeep(t *testing.T, typ *types.Type, v ref.Val, size uint64, text string) {
	t.Helper()
	bound := partsDeep(typ, size)
	if got := deepSize(v, math.MaxUint64-1); got > bound {
		t.Errorf("deepSize(%.30s…) = %d, partsDeep = %d", text, got, bound)
	}
	if got := deepSize(types.OptionalOf(v), math.MaxUint64-1); got > bound+1 {
		t.Errorf("deepSize(optional.of(%.30s…)) = %d, partsDeep + its optional = %d", text, got, bound+1)
	}
}

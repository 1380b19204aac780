package intern

import (
	"fmt"
	"reflect"
	"testing"
)

// sameMap reports whether a and b are one map in memory, not two of equal content.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestMapsSharesOneMapPerContent(t *testing.T) {
	table := NewMaps()
	a := table.Share(map[string]string{"tier": "web", "env": "prod"})
	b := table.Share(map[string]string{"env": "prod", "tier": "web"})
	c := table.Share(map[string]string{"tier": "db", "env": "prod"})
	d := table.Share(map[string]string{"tierenv": "", "": "webprod"}) // entries are hashed apart
	if !sameMap(a, b) {
		t.Errorf("two maps of equal content are two copies, want one shared")
	}
	if sameMap(a, c) || sameMap(a, d) || c["tier"] != "db" || d["tierenv"] != "" {
		t.Errorf("maps of different content share one map: %v %v %v", a, c, d)
	}
	if got := table.Share(nil); got != nil {
		t.Errorf("nil is shared as %v, want nil", got)
	}
	big := map[string]string{}
	for i := range MaxSharedEntries + 1 {
		big[fmt.Sprint(i)] = "v"
	}
	if got := table.Share(big); !sameMap(got, big) || table.size != 3 {
		t.Errorf("a map above MaxSharedEntries is kept in the table (size %d)", table.size)
	}
}

func TestMapsIsBoundedAndKeepsWhatRecurs(t *testing.T) {
	table := NewMaps()
	shared := table.Share(map[string]string{"tier": "web"})
	for i := range 5 * Generation { // unique contents churn through, the shared one recurs
		table.Share(map[string]string{"vm": fmt.Sprint(i)})
		if i%(Generation/2) == 0 {
			if got := table.Share(map[string]string{"tier": "web"}); !sameMap(got, shared) {
				t.Fatalf("after %d unique maps a recurring content got a second copy", i)
			}
		}
	}
	held := 0
	for _, gen := range []map[uint64][]sharedMap{table.current, table.previous} {
		for _, bucket := range gen {
			held += len(bucket)
		}
	}
	if held > 2*Generation {
		t.Errorf("the table holds %d maps, want at most %d", held, 2*Generation)
	}
}

func TestMapsFindsASharedMapWrittenTo(t *testing.T) {
	table := NewMaps()
	m := table.Share(map[string]string{"tier": "web"})
	if got := table.Intact(); got != nil {
		t.Fatalf("Intact reports %v before any write", got)
	}
	m["tier"] = "db" // what a reader writing into a cached object instead of a copy does
	if got := table.Intact(); got == nil || got["tier"] != "db" {
		t.Errorf("Intact = %v, want the map written to", got)
	}
}

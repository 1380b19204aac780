package manifest_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/vmipam/vmipam/internal/manifest"
)

func TestSplitKeepsTheIndexOfEveryNonEmptyDocument(t *testing.T) {
	docs, err := manifest.Split([]byte(`# a comment-only document
---
kind: A
metadata: {name: a}
---
null
---
{"kind": "B"}
---
# trailing comment
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range docs {
		got = append(got, strconv.Itoa(d.Index)+" "+string(d.JSON))
	}
	want := []string{`1 {"kind":"A","metadata":{"name":"a"}}`, `3 {"kind":"B"}`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("documents:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSplitNamesTheDocumentOfASyntaxError(t *testing.T) {
	_, err := manifest.Split([]byte("kind: A\n---\nkind: [B\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "document 1: ") {
		t.Errorf("error = %v, want one naming document 1", err)
	}
}

package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Document is one non-empty document of a stream.
type Document struct {
	// Index is the document's position in the stream, from 0, counting the empty documents
	// between separators too, so that messages name the document a reader of the file counts.
	Index int
	// JSON is the document converted to JSON.
	JSON []byte
}

// Split reads every document of data, YAML or JSON, in order, converts each to JSON and drops
// the empty ones (nothing, or only comments). A key given twice in one mapping is an error,
// as kubectl's default (strict) validation makes it: converted loosely, the last one won
// silently, so `ipamctl lint` passed a policy with two `hotplug:` keys that the dry-run API
// refused (issue #15, tester atk18). An error names the document's index.
func Split(data []byte) ([]Document, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []Document
	for i := 0; ; i++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		js, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
			continue
		}
		out = append(out, Document{Index: i, JSON: js})
	}
}

package policy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/vmipam/vmipam/policies/v1alpha1"
)

// AnnotationLastGood holds, on each ClusterIPAMPolicy, the newest generation that compiled:
// {"generation": N, "spec": {...}} as compact JSON. The policy reconciler writes it whenever
// the serving generation changes and restores it when it is removed or altered; after a
// controller restart it is what keeps a policy's last good generation in force while the
// current generation does not compile. It is controller-owned: do not edit it.
const AnnotationLastGood = "ipam.virtualization.deckhouse.io/last-good-spec"

// maxLastGoodBytes bounds the annotation's value, well below the API server's 256 KiB limit
// on all annotations of an object together.
const maxLastGoodBytes = 128 << 10

// lastGood is the value of AnnotationLastGood.
type lastGood struct {
	Generation int64                          `json:"generation"`
	Spec       v1alpha1.ClusterIPAMPolicySpec `json:"spec"`
}

// encodeLastGood returns the annotation value recording src's generation and spec.
func encodeLastGood(src *v1alpha1.ClusterIPAMPolicy) (string, error) {
	data, err := json.Marshal(lastGood{Generation: src.Generation, Spec: src.Spec})
	if err != nil {
		return "", fmt.Errorf("encoding the last good spec of %s: %w", src.Name, err)
	}
	return string(data), nil
}

// decodeLastGood returns the generation stored in p's AnnotationLastGood as a policy object
// (p's metadata, the stored generation and spec), or nil when there is none. Unknown fields
// are errors: a spec this version cannot read completely is not served half-understood. A
// stored generation not older than p's is an error too (the annotation was copied from
// another object, or edited): it cannot be a previous generation of p.
func decodeLastGood(p *v1alpha1.ClusterIPAMPolicy) (*v1alpha1.ClusterIPAMPolicy, error) {
	lg, err := readLastGood(p)
	if err != nil || lg == nil {
		return nil, err
	}
	if lg.Generation <= 0 || lg.Generation >= p.Generation {
		return nil, fmt.Errorf("annotation %s records generation %d, which is not a previous generation of this policy (now %d)",
			AnnotationLastGood, lg.Generation, p.Generation)
	}
	out := p.DeepCopy()
	out.Generation = lg.Generation
	out.Spec = lg.Spec
	return out, nil
}

// readLastGood decodes p's AnnotationLastGood, nil when there is none. Unknown fields are
// errors (decodeLastGood says why).
func readLastGood(p *v1alpha1.ClusterIPAMPolicy) (*lastGood, error) {
	raw, ok := p.Annotations[AnnotationLastGood]
	if !ok {
		return nil, nil
	}
	var lg lastGood
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&lg); err != nil {
		return nil, fmt.Errorf("annotation %s is not readable: %w", AnnotationLastGood, err)
	}
	return &lg, nil
}

// recordsItself reports whether p's AnnotationLastGood records p's own generation and spec:
// the controller compiled this very generation before.
func recordsItself(p *v1alpha1.ClusterIPAMPolicy) bool {
	lg, err := readLastGood(p)
	return err == nil && lg != nil && lg.Generation == p.Generation && equality.Semantic.DeepEqual(lg.Spec, p.Spec)
}

package apiserver

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	dryrunv1 "github.com/vmipam/vmipam/controller/dryrun/v1alpha1"
)

// Scheme holds the dry-run API and the meta types the generic API server encodes (Status,
// discovery) and decodes (CreateOptions), as every aggregated API server registers them.
var Scheme = newScheme()

// Codecs are the serializers of Scheme.
var Codecs = serializer.NewCodecFactory(Scheme)

// servedSerializers are the media types the evaluations resource negotiates: JSON and YAML.
// Evaluation has no protobuf encoding (its spec and status carry arbitrary manifests), so
// the group must not offer the protobuf serializer every CodecFactory has: advertised, a
// client preferring it (Accept: application/vnd.kubernetes.protobuf, application/json) would
// be answered 406 — after the evaluation ran — instead of falling back to JSON.
var servedSerializers runtime.NegotiatedSerializer = jsonAndYAML{Codecs}

// jsonAndYAML is a NegotiatedSerializer offering only the JSON and YAML of its codecs.
type jsonAndYAML struct{ runtime.NegotiatedSerializer }

// SupportedMediaTypes are the wrapped serializers' without protobuf (and CBOR).
func (s jsonAndYAML) SupportedMediaTypes() []runtime.SerializerInfo {
	var out []runtime.SerializerInfo
	for _, info := range s.NegotiatedSerializer.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeJSON || info.MediaType == runtime.ContentTypeYAML {
			out = append(out, info)
		}
	}
	return out
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(dryrunv1.AddToScheme(s))
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	s.AddUnversionedTypes(unversioned, &metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{},
		&metav1.APIGroup{}, &metav1.APIResourceList{})
	return s
}

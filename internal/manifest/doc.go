// Package manifest reads streams of Kubernetes manifests: YAML or JSON documents separated by
// "---", as kubectl apply -f takes them. It is the one place that splits such streams, for
// the shipped default policies, the shipped ClusterRoles, ipamctl's input files and the test
// harnesses; each decodes the documents as it needs (strictly into a type, or unstructured).
// It imports nothing of vmipam, so every package may use it.
package manifest

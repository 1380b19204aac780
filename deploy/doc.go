// Package deploy holds vmipam's Helm chart (helm/vmipam) and renders it with Helm's Go SDK
// exactly as `helm template` does, for the chart's own tests (lint, schema, what each value
// renders) and the install test (test/install), which applies the output to a real API
// server. The controller binary does not link it.
package deploy

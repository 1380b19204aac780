package samples

import "embed"

// FS holds the sample manifests: *.yaml is applied at start, later/*.yaml once the first
// state has converged (to show a hotplug).
//
//go:embed *.yaml later/*.yaml
var FS embed.FS

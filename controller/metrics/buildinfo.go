package metrics

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// buildInfo is vmipam_build_info: always 1, the labels say what runs.
var buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "vmipam_build_info",
	Help: "Always 1; the labels name the running build: version, VCS revision and Go version.",
}, []string{"version", "revision", "go_version"})

// SetBuildInfo replaces the labels of vmipam_build_info. Empty values fall back to what the
// Go toolchain recorded in the binary (module version, vcs.revision).
func SetBuildInfo(version, revision string) {
	defVersion, defRevision := recordedBuild()
	if version == "" {
		version = defVersion
	}
	if revision == "" {
		revision = defRevision
	}
	buildInfo.Reset()
	buildInfo.WithLabelValues(version, revision, runtime.Version()).Set(1)
}

// recordedBuild is the main module's version and VCS revision as the Go toolchain recorded
// them ("(devel)" and "unknown" when it recorded none, e.g. under -buildvcs=false).
func recordedBuild() (version, revision string) {
	version, revision = "(devel)", "unknown"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version, revision
	}
	if info.Main.Version != "" {
		version = info.Main.Version
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && s.Value != "" {
			revision = s.Value
		}
	}
	return version, revision
}

// Command image builds vmipam's controller image without a container runtime, the way ko
// does (go-containerregistry): a static, -trimpath binary with its version stamped, on a
// distroless-static-style base built here (no base image can be pulled on every build
// machine), running as the nonroot user 65532. It writes an OCI image layout (DIR) and a
// tarball (DIR.tar, loadable with `docker load` or `podman load`, pushable with `crane push`).
// The Dockerfile builds the same image for CI systems that have a container runtime.
//
// Usage: go run ./hack/image -version v0.1.0 -out bin/image [-repository ghcr.io/vmipam/ipam-controller]
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
)

func main() {
	var o options
	flag.StringVar(&o.version, "version", "dev", "version stamped into the binary (main.version) and the image labels")
	flag.StringVar(&o.out, "out", "bin/image", "OCI layout directory to write; the tarball is <out>.tar")
	flag.StringVar(&o.repository, "repository", "ghcr.io/vmipam/ipam-controller", "repository the tarball's tag names")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "GOARCH of the binary and the image")
	flag.Parse()
	if err := build(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

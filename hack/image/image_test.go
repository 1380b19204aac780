package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImage builds the image as `make image` does, reads it back from the OCI layout and the
// tarball, unpacks its filesystem and runs the binary in it.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the controller")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "image")
	const version = "v9.8.7-test"
	if err := os.Chdir(filepath.Join("..", "..")); err != nil { // build from the module root
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chdir(filepath.Join("hack", "image")) })
	if err := build(options{version: version, out: out, repository: "example.com/vmipam/ipam-controller", arch: runtime.GOARCH}); err != nil {
		t.Fatal(err)
	}

	idx, err := layout.ImageIndexFromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil || len(manifest.Manifests) != 1 {
		t.Fatalf("OCI layout index: %v, %d manifests, want 1", err, len(manifest.Manifests))
	}
	img, err := idx.Image(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{"/ipam-controller"}) || cf.Config.User != "65532:65532" ||
		cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("config: entrypoint %q, user %q, platform %s/%s; want [/ipam-controller], 65532:65532, linux/%s",
			cf.Config.Entrypoint, cf.Config.User, cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if got := cf.Config.Labels["org.opencontainers.image.version"]; got != version {
		t.Errorf("version label %q, want %q", got, version)
	}

	tag, err := name.NewTag("example.com/vmipam/ipam-controller:" + version)
	if err != nil {
		t.Fatal(err)
	}
	fromTar, err := tarball.ImageFromPath(out+".tar", &tag)
	if err != nil {
		t.Fatalf("tarball: %v", err)
	}
	// The tarball carries a Docker manifest, so compare what it points to: the configuration.
	c1, _ := img.ConfigName()
	c2, _ := fromTar.ConfigName()
	if c1 != c2 {
		t.Errorf("tarball holds configuration %s, the layout %s", c2, c1)
	}

	root := filepath.Join(dir, "rootfs")
	unpack(t, img, root)
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil || !strings.Contains(string(passwd), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot user 65532 (%v):\n%s", err, passwd)
	}
	got, err := exec.Command(filepath.Join(root, "ipam-controller"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(got), version) {
		t.Errorf("ipam-controller --version = %q (%v), want it to name %s", got, err, version)
	}
}

// unpack writes the image's flattened filesystem (regular files and directories) below root,
// keeping the files' modes.
func unpack(t *testing.T, img v1.Image, root string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(root, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { // upper layers come first
			t.Fatal(err)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(path, data, os.FileMode(h.Mode).Perm())
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

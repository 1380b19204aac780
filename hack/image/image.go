package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user (distroless's "nonroot"), entrypoint and the package it is built from.
const (
	uid        = 65532
	entrypoint = "/ipam-controller"
	pkg        = "./cmd/ipam-controller"
)

// options of one image build.
type options struct {
	version, out, repository, arch string
}

// epoch is the time of every file and of the image: the build is reproducible.
var epoch = time.Unix(0, 0).UTC()

// build compiles the controller, puts it on the base layer and writes o.out and o.out.tar.
func build(o options) error {
	bin := filepath.Join(o.out + ".bin")
	if err := compile(bin, o); err != nil {
		return err
	}
	defer os.Remove(bin)
	binary, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	img, err := assemble(binary, o)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(o.out); err != nil {
		return err
	}
	idx, err := layout.Write(o.out, empty.Index)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(o.repository + ":" + o.version)
	if err != nil {
		return err
	}
	if err := idx.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag.String()})); err != nil {
		return err
	}
	return tarball.WriteToFile(o.out+".tar", tag, img)
}

// compile builds the static binary as the Dockerfile does.
func compile(out string, o options) error {
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+o.version, "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.arch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return nil
}

// assemble returns the image: the base layer, the binary's layer and the configuration.
func assemble(binary []byte, o options) (v1.Image, error) {
	base, err := layer(baseFiles())
	if err != nil {
		return nil, err
	}
	app, err := layer([]file{{name: entrypoint[1:], mode: 0o755, data: binary}})
	if err != nil {
		return nil, err
	}
	oci := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(oci, base, app)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", o.arch, v1.Time{Time: epoch}
	cf.Config.Entrypoint = []string{entrypoint}
	cf.Config.User = fmt.Sprintf("%d:%d", uid, uid)
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":   "vmipam ipam-controller",
		"org.opencontainers.image.version": o.version,
		"org.opencontainers.image.source":  "https://github.com/vmipam/vmipam",
	}
	return mutate.ConfigFile(img, cf)
}

// file is one entry of a layer: a regular file with data, or a directory when dir is set.
type file struct {
	name     string
	mode     int64
	data     []byte
	dir      bool
	uid, gid int
}

// baseFiles is a distroless-static-style root: the users root and nonroot (65532) with their
// groups and homes, and a world-writable /tmp. No shell, no package manager, no CA
// certificates: the controller talks only to the API server, whose CA the ServiceAccount
// token mount provides.
func baseFiles() []file {
	return []file{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/nonroot", mode: 0o700, dir: true, uid: uid, gid: uid},
		{name: "root", mode: 0o700, dir: true},
		{name: "tmp", mode: 0o1777, dir: true},
	}
}

// layer writes files into one gzip-compressed tar layer.
func layer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: epoch,
			Typeflag: tar.TypeReg, Size: int64(len(f.data)), Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name, h.Size = tar.TypeDir, f.name+"/", 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

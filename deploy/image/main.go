// Command image builds stamen's container image without a container
// engine: it cross-compiles the static binary for each platform and writes
// an OCI image (an index of one image per platform) onto an empty base, as
// the Dockerfile's final stage does: the binary, the CA certificates of the
// build machine, a passwd and group file naming the non-root user, and an
// empty /data owned by it for the bbolt store. It needs only Go and the
// module proxy (go-containerregistry), so it runs where no docker daemon,
// buildah or registry can: on CI and on this project's build machines.
//
//	go run ./deploy/image -o dist/image -platforms linux/amd64,linux/arm64
//
// The OCI layout it writes is read by podman, skopeo, crane and umoci;
// -tar also writes a single platform's image as a tarball `docker load`
// takes.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: distroless' "nonroot", which Kubernetes'
// runAsNonRoot accepts as a number.
const uid, gid = 65532, 65532

// Config is the image's configuration; the Dockerfile says the same
// (deploy_test checks that they agree).
var Config = v1.Config{
	Entrypoint:   []string{"/stamen"},
	User:         fmt.Sprintf("%d:%d", uid, gid),
	WorkingDir:   "/data",
	ExposedPorts: map[string]struct{}{"5555/tcp": {}},
	Volumes:      map[string]struct{}{"/data": {}},
	// Defaults under Flower's names, so that what a user gives, under
	// Flower's name or stamen's (STAMEN_* wins over FLOWER_*), replaces
	// them.
	Env: []string{
		// Flower's image listens on every interface; stamen still
		// refuses to serve the API there without credentials (give
		// FLOWER_BASIC_AUTH, or FLOWER_UNAUTHENTICATED_API=true).
		"FLOWER_ADDRESS=0.0.0.0",
		// The store lives in the volume; with a broker given, persistence
		// is asked for, as Flower's image users pass --persistent.
		"FLOWER_DB=/data/stamen.db",
		"FLOWER_PERSISTENT=true",
		"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
	},
	Labels: map[string]string{
		"org.opencontainers.image.title":  "stamen",
		"org.opencontainers.image.source": "https://github.com/stamen-dev/stamen",
	},
}

func main() {
	out := flag.String("o", "dist/image", "directory of the OCI image layout to write")
	platforms := flag.String("platforms", "linux/"+runtime.GOARCH, "comma-separated os/arch list")
	version := flag.String("version", "", "version to stamp (-ldflags -X), empty: the build information's")
	commit := flag.String("commit", "", "commit to stamp, empty: the build information's")
	date := flag.String("date", "", "build date to stamp (the commit's time), empty: the build information's")
	tag := flag.String("tag", "stamen:latest", "the image's name in the layout and the tarball")
	tarPath := flag.String("tar", "", "also write the first platform's image here, as a tarball docker load takes")
	certs := flag.String("certs", "/etc/ssl/certs/ca-certificates.crt", "CA certificates bundle to put in the image")
	flag.Parse()
	stamp := map[string]string{"version": *version, "commit": *commit, "date": *date}
	if err := build(*out, strings.Split(*platforms, ","), stamp, *tag, *tarPath, *certs); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// build writes the image; stamp holds the values -ldflags -X sets in
// internal/version (version, commit, date), empty ones left out.
func build(out string, platforms []string, stamp map[string]string, tag, tarPath, certs string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(certs)
	if err != nil {
		return fmt.Errorf("CA certificates (Debian's ca-certificates package): %w", err)
	}
	tmp, err := os.MkdirTemp("", "stamen-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var idx v1.ImageIndex = empty.Index
	idx = mutate.IndexMediaType(idx, types.OCIImageIndex)
	var first v1.Image
	var single []v1.Image
	for _, p := range platforms {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || goos != "linux" {
			return fmt.Errorf("platform %q: want linux/<arch>", p)
		}
		bin := filepath.Join(tmp, "stamen-"+goarch)
		if err := compile(bin, goarch, stamp); err != nil {
			return err
		}
		img, err := image(bin, caPEM, goarch)
		if err != nil {
			return err
		}
		if first == nil {
			first = img
		}
		single = append(single, img)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform:    &v1.Platform{OS: goos, Architecture: goarch},
			Annotations: map[string]string{"org.opencontainers.image.ref.name": ref.TagStr()},
		}})
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	lp, err := layout.Write(out, empty.Index)
	if err != nil {
		return err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref.TagStr()})); err != nil {
		return err
	}
	// Each platform's image under <tag>-<arch> too, for the tools that
	// do not follow an index (umoci).
	for i, img := range single {
		cf, err := img.ConfigFile()
		if err != nil {
			return err
		}
		if err := lp.AppendImage(img, layout.WithPlatform(v1.Platform{OS: "linux", Architecture: cf.Architecture}),
			layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref.TagStr() + "-" + cf.Architecture})); err != nil {
			return fmt.Errorf("platform %d: %w", i, err)
		}
	}
	if tarPath != "" {
		if err := tarball.WriteToFile(tarPath, ref, first); err != nil {
			return err
		}
	}
	return nil
}

// compile builds the static binary for linux/goarch: no cgo, no paths of
// the build machine.
func compile(bin, goarch string, stamp map[string]string) error {
	args := []string{"build", "-trimpath", "-o", bin}
	ld := "-s -w"
	for _, k := range []string{"version", "commit", "date"} {
		if v := stamp[k]; v != "" {
			ld += " -X github.com/stamen-dev/stamen/internal/version." + k + "=" + v
		}
	}
	args = append(args, "-ldflags", ld, "./cmd/stamen")
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for linux/%s: %w", goarch, err)
	}
	return nil
}

// image is one platform's image: a single layer on an empty base.
func image(bin string, caPEM []byte, goarch string) (v1.Image, error) {
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// A fixed time keeps the layer's digest that of its contents.
	mtime := time.Unix(0, 0)
	dir := func(name string, owner int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, Uid: owner, Gid: owner, ModTime: mtime})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	steps := []func() error{
		func() error { return dir("etc", 0) },
		func() error { return dir("etc/ssl", 0) },
		func() error { return dir("etc/ssl/certs", 0) },
		func() error { return file("etc/ssl/certs/ca-certificates.crt", 0o644, caPEM) },
		func() error {
			return file("etc/passwd", 0o644, fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/data:/sbin/nologin\n", uid, gid))
		},
		func() error { return file("etc/group", 0o644, fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", gid)) },
		// The volume's mount point, the user's: a volume mounted there
		// empty takes its owner from it.
		func() error { return dir("data", uid) },
		func() error { return dir("tmp", 0) },
		func() error { return file("stamen", 0o755, binary) },
		tw.Close,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		CreatedBy: "deploy/image: stamen, CA certificates, passwd, /data", Created: v1.Time{Time: mtime},
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Config = Config
	cf.OS, cf.Architecture = "linux", goarch
	cf.Created = v1.Time{Time: mtime}
	return mutate.ConfigFile(img, cf)
}

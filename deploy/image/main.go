// Command image writes the image of Swift's binaries, the one the Helm
// chart's DaemonSets run (deploy/helm/swift), as a docker-archive that
// `ctr images import` and skopeo read: no base image and no registry. It
// lays the binaries out as `make install` does on a node:
//
//	/usr/local/bin/        swift-node, swiftctl, containerd-shim-swift-v2, swift-hook
//	/usr/local/lib/swift/  swift-init, swift-run, the verbs cache's pieces, lib/, handlers/
//
// The Go programs come from --static (built with CGO_ENABLED=0: the image
// has no libc); the zygote's, static already, from --bin.
//
//	go run ./deploy/image --bin bin --static out/image-bin --ref swift-rdma/swift:0.1.0 --out out/swift-image.tar
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/swift-rdma/swift-containerd/test/harness"
)

// The image's programs, by where they go.
var (
	goPrograms = []string{"swift-node", "swiftctl", "containerd-shim-swift-v2", "swift-hook"}
	libFiles   = []string{"swift-init", "swift-run", "swift-gateway", "swift-warm", "swift-warm-dyn", "swift-profile", "libswiftverbs.so"}
	libDirs    = []string{"lib", "handlers"}
)

func main() {
	bin := flag.String("bin", "bin", "make build's output (the zygote's binaries)")
	static := flag.String("static", "", "the Go programs built with CGO_ENABLED=0")
	ref := flag.String("ref", "", "the image's name, e.g. swift-rdma/swift:0.1.0")
	out := flag.String("out", "", "the docker-archive to write")
	flag.Parse()
	if err := run(*bin, *static, *ref, *out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(bin, static, ref, out string) error {
	if static == "" || ref == "" || out == "" {
		return fmt.Errorf("--static, --ref and --out are required")
	}
	files := map[string]harness.File{}
	add := func(src, dst string) error {
		data, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("%w (make build, then the static Go build, make them)", err)
		}
		files[dst] = harness.File{Mode: 0o755, Data: data}
		return nil
	}
	for _, p := range goPrograms {
		if err := add(filepath.Join(static, p), "usr/local/bin/"+p); err != nil {
			return err
		}
	}
	for _, f := range libFiles {
		if err := add(filepath.Join(bin, f), "usr/local/lib/swift/"+f); err != nil {
			return err
		}
	}
	for _, d := range libDirs {
		sub, err := harness.FilesFromDir(filepath.Join(bin, d))
		if err != nil {
			return err
		}
		for p, f := range sub {
			if f.Mode&fs.ModeDir == 0 && f.Mode&fs.ModeSymlink == 0 {
				f.Mode = 0o755
			}
			files["usr/local/lib/swift/"+d+"/"+p] = f
		}
	}
	img := harness.Image{Ref: ref, Files: files, Entrypoint: []string{"/usr/local/bin/swift-node"},
		Env: []string{"PATH=/usr/local/bin"}}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := harness.WriteDockerArchive(out, img); err != nil {
		return err
	}
	fmt.Printf("image: %s in %s (%d files)\n", ref, out, len(files))
	return nil
}

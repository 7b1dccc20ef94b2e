package harness

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// File is one entry of an image layer.
type File struct {
	// Mode holds the permission bits, plus fs.ModeDir for a directory or
	// fs.ModeSymlink for a symbolic link; no type bit means a regular file.
	Mode fs.FileMode
	Data []byte // content of a regular file
	Link string // target of a symbolic link
}

// Image is a single-layer image for this machine's platform, built from
// files only: no registry, no base image.
type Image struct {
	Ref        string          // e.g. swift.local/pause:1 (docker-archive RepoTags)
	Files      map[string]File // path inside the image (no leading slash needed) → entry
	Entrypoint []string
	Cmd        []string
	Env        []string
}

// layerTime stamps every layer entry, so equal inputs make equal archives.
var layerTime = time.Unix(0, 0).UTC()

// WriteDockerArchive writes img to path as a docker-archive tar
// (manifest.json, the image config JSON and one uncompressed layer tar),
// the format `ctr images import` reads. Parent directories missing from
// img.Files are added with mode 0755.
func WriteDockerArchive(path string, img Image) error {
	if img.Ref == "" {
		return fmt.Errorf("image has no reference")
	}
	layer, err := layerTar(img.Files)
	if err != nil {
		return fmt.Errorf("image %s: %w", img.Ref, err)
	}
	diffID := sha256.Sum256(layer)
	env := img.Env
	if env == nil {
		env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	}
	cfg, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      layerTime.Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": img.Entrypoint,
			"Cmd":        img.Cmd,
			"Env":        env,
			"WorkingDir": "/",
		},
		"rootfs": map[string]any{
			"type":     "layers",
			"diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])},
		},
		"history": []map[string]any{{"created": layerTime.Format(time.RFC3339), "created_by": "swift test harness"}},
	})
	if err != nil {
		return err
	}
	cfgSum := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(cfgSum[:]) + ".json"
	layerName := hex.EncodeToString(diffID[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   cfgName,
		"RepoTags": []string{img.Ref},
		"Layers":   []string{layerName},
	}})
	if err != nil {
		return err
	}

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range []struct {
		name string
		data []byte
	}{
		{hex.EncodeToString(diffID[:]) + "/", nil},
		{layerName, layer},
		{cfgName, cfg},
		{"manifest.json", manifest},
	} {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: layerTime, Typeflag: tar.TypeReg}
		if strings.HasSuffix(e.name, "/") {
			h.Mode, h.Typeflag = 0o755, tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(e.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// layerTar makes the layer: every entry owned by root, parents first.
func layerTar(files map[string]File) ([]byte, error) {
	all := map[string]File{}
	for p, f := range files {
		p = strings.Trim(path.Clean("/"+p), "/")
		if p == "" {
			continue
		}
		all[p] = f
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = File{Mode: fs.ModeDir | 0o755}
			}
		}
	}
	names := make([]string, 0, len(all))
	for p := range all {
		names = append(names, p)
	}
	sort.Strings(names) // a parent sorts before its children
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range names {
		f := all[p]
		h := &tar.Header{Name: p, Mode: int64(f.Mode.Perm()), ModTime: layerTime, Format: tar.FormatPAX}
		switch {
		case f.Mode&fs.ModeDir != 0:
			h.Typeflag, h.Name = tar.TypeDir, p+"/"
		case f.Mode&fs.ModeSymlink != 0:
			if f.Link == "" {
				return nil, fmt.Errorf("symlink %s has no target", p)
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, f.Link
		case f.Mode.IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.Data))
		default:
			return nil, fmt.Errorf("%s: unsupported file mode %v", p, f.Mode)
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// BusyboxFiles are the files of a busybox image: Debian busybox-static's
// binary with a link per applet in /bin, root in /etc/passwd and
// /etc/group, and the directories runc expects.
func BusyboxFiles() (map[string]File, error) {
	data, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return nil, fmt.Errorf("read %s (Debian busybox-static; run `make deps`): %w", BusyboxPath, err)
	}
	out, err := exec.Command(BusyboxPath, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", BusyboxPath, err)
	}
	files := map[string]File{
		"bin/busybox": {Mode: 0o755, Data: data},
		"etc/passwd":  {Mode: 0o644, Data: []byte("root:x:0:0:root:/:/bin/sh\n")},
		"etc/group":   {Mode: 0o644, Data: []byte("root:x:0:\n")},
	}
	for _, d := range []string{"dev", "proc", "sys", "tmp", "run", "root"} {
		files[d] = File{Mode: fs.ModeDir | 0o755}
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			files["bin/"+applet] = File{Mode: fs.ModeSymlink | 0o777, Link: "busybox"}
		}
	}
	return files, nil
}

// PausePackage is the Go package of the tests' CRI sandbox program.
const PausePackage = "github.com/swift-rdma/swift-containerd/test/images/pause"

// BuildPause builds the static pause program (CGO_ENABLED=0) into dir and
// returns its path. It runs `go build` in the working directory, which
// must lie inside this module (go test runs there).
func BuildPause(ctx context.Context, dir string) (string, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("go toolchain not on PATH (needed to build the pause image): %w", err)
	}
	out := filepath.Join(dir, "pause")
	cmd := exec.CommandContext(ctx, gobin, "build", "-trimpath", "-o", out, PausePackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", PausePackage, err, b)
	}
	return out, nil
}

// PauseImage builds the pause program and returns an image whose
// entrypoint is /pause.
func PauseImage(ctx context.Context, dir, ref string) (Image, error) {
	bin, err := BuildPause(ctx, dir)
	if err != nil {
		return Image{}, err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return Image{}, err
	}
	return Image{Ref: ref, Files: map[string]File{"pause": {Mode: 0o755, Data: data}}, Entrypoint: []string{"/pause"}}, nil
}

// BusyboxImage returns a busybox image (see BusyboxFiles) running sh.
func BusyboxImage(ref string) (Image, error) {
	files, err := BusyboxFiles()
	if err != nil {
		return Image{}, err
	}
	return Image{Ref: ref, Files: files, Cmd: []string{"sh"}, Env: []string{"PATH=/bin"}}, nil
}

// FilesFromDir reads the tree under dir into image entries: directories,
// symbolic links and regular files with their permission bits (a hard
// link becomes a copy).
func FilesFromDir(dir string) (map[string]File, error) {
	files := map[string]File{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			files[rel] = File{Mode: fs.ModeDir | info.Mode().Perm()}
		case info.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			files[rel] = File{Mode: fs.ModeSymlink | 0o777, Link: t}
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files[rel] = File{Mode: info.Mode().Perm(), Data: data}
		default:
			return fmt.Errorf("%s: unsupported file type %v", p, info.Mode().Type())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("image files from %s: %w", dir, err)
	}
	return files, nil
}

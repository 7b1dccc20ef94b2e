package version

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Version is the project's version, set at build time with
//
//	-ldflags "-X github.com/swift-rdma/swift-containerd/internal/version.Version=VERSION"
//
// Empty when the build did not set it: Get then falls back to the VCS
// revision the Go toolchain recorded, and then to "dev".
var Version = ""

// ContainerdModule is the module whose linked version Info reports.
const ContainerdModule = "github.com/containerd/containerd/v2"

// Info is what a binary reports about its build.
type Info struct {
	// Program is the binary's name.
	Program string `json:"program"`
	// Version is Version, else the VCS revision (with "-dirty" for a build
	// from a modified tree), else "dev".
	Version string `json:"version"`
	// Containerd is the version of ContainerdModule linked into the binary
	// (its replacement's, when go.mod replaces it); "unknown" when the
	// binary carries no module information.
	Containerd string `json:"containerd"`
	// Go is the toolchain that built the binary.
	Go string `json:"go"`
}

// Get returns the build information of the running binary, named program.
func Get(program string) Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(program, Version, bi)
}

// fromBuildInfo is Get on given inputs (bi may be nil).
func fromBuildInfo(program, stamped string, bi *debug.BuildInfo) Info {
	i := Info{Program: program, Version: stamped, Containerd: "unknown", Go: runtime.Version()}
	if bi == nil {
		if i.Version == "" {
			i.Version = "dev"
		}
		return i
	}
	if bi.GoVersion != "" {
		i.Go = bi.GoVersion
	}
	for _, m := range bi.Deps {
		if m.Path != ContainerdModule {
			continue
		}
		if m.Replace != nil && m.Replace.Version != "" {
			m = m.Replace
		}
		if m.Version != "" {
			i.Containerd = m.Version
		}
	}
	if i.Version == "" {
		var rev string
		var dirty bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		switch {
		case rev != "" && dirty:
			i.Version = rev + "-dirty"
		case rev != "":
			i.Version = rev
		default:
			i.Version = "dev"
		}
	}
	return i
}

// WriteText prints i the way containerd's binaries print theirs:
//
//	swiftctl:
//	  Version:    v0.3.0-12-g1a2b3c4
//	  containerd: v2.2.9
//	  Go version: go1.26.8
func (i Info) WriteText(w io.Writer) error {
	_, err := fmt.Fprintf(w, "%s:\n  Version:    %s\n  containerd: %s\n  Go version: %s\n", i.Program, i.Version, i.Containerd, i.Go)
	return err
}

// WriteJSON prints i as one JSON object.
func (i Info) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(i, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

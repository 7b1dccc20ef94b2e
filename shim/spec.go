package shim

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/containerd/errdefs"
	"github.com/opencontainers/runtime-spec/specs-go"

	"github.com/swift-rdma/swift-containerd/internal/atomicfile"
)

// SpecFile is the OCI spec's name inside a bundle.
const SpecFile = "config.json"

func readSpec(path string) (*specs.Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	var s specs.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("parse spec %s: %v: %w", path, err, errdefs.ErrInvalidArgument)
	}
	return &s, nil
}

// validateSpec checks what the chain relies on and must leave consistent.
func validateSpec(s *specs.Spec) error {
	if s.Process == nil || s.Root == nil {
		return fmt.Errorf("spec lacks process or root: %w", errdefs.ErrInvalidArgument)
	}
	if s.Linux != nil {
		seen := map[string]bool{}
		for _, d := range s.Linux.Devices {
			if seen[d.Path] {
				return fmt.Errorf("spec lists device %s twice: %w", d.Path, errdefs.ErrInvalidArgument)
			}
			seen[d.Path] = true
		}
	}
	return nil
}

// writeSpecAtomic replaces path with s, keeping its mode (atomicfile).
func writeSpecAtomic(path string, s *specs.Spec) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("stat spec: %w", err)
	}
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode spec: %w", err)
	}
	return atomicfile.Write(path, data, fi.Mode().Perm())
}

package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/swift-rdma/swift-containerd/cdispec"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/rdma"
)

// cmdCDI: swiftctl cdi generate [--dir DIR] [--stdout] [--config FILE].
func cmdCDI(out io.Writer, args []string) error {
	if len(args) < 1 || args[0] != "generate" {
		return fmt.Errorf("usage: swiftctl cdi generate [--dir DIR] [--stdout] [--config FILE]")
	}
	fs := flag.NewFlagSet("cdi generate", flag.ContinueOnError)
	dir := fs.String("dir", cdispec.DefaultDir, "CDI spec directory to write into (one of containerd's cdi_spec_dirs)")
	stdout := fs.Bool("stdout", false, "print the spec instead of writing it")
	cfgPath := fs.String("config", config.PathFromEnv(), "node config (its sys_root and dev_root)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("cdi generate: unexpected arguments %q", fs.Args())
	}
	c, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	inv, err := rdma.Discover(c.RDMA.SysRoot, c.RDMA.DevRoot)
	if err != nil {
		return err
	}
	s, err := cdispec.Spec(inv)
	if err != nil {
		return err
	}
	if *stdout {
		b, err := yaml.Marshal(s)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	path, err := cdispec.Write(*dir, s)
	if err != nil {
		return err
	}
	var names []string
	for _, d := range inv.Devices {
		names = append(names, cdispec.Name(d.Name))
	}
	fmt.Fprintf(out, "wrote %s: %s\n", path, strings.Join(names, ", "))
	return nil
}

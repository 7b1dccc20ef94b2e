package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/swift-rdma/swift-containerd/cdispec"
	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/hooks"
	"github.com/swift-rdma/swift-containerd/rdma"
)

func newCDICmd() *cobra.Command {
	gen := &cobra.Command{
		Use:   "generate",
		Short: "Write the CDI spec of the node's RDMA devices",
		Long: `Write the CDI spec of the node's RDMA devices (swift.io/rdma=DEVICE, with the
rdma_cm node for all) into --dir, one of containerd's cdi_spec_dirs.
--stdout prints the spec instead (YAML; JSON with -o json). With -o json
and no --stdout, the spec is written and {"path", "devices", "spec"} printed.`,
		Args: noArgs,
	}
	dir := gen.Flags().String("dir", cdispec.DefaultDir, "CDI spec directory to write into (one of containerd's cdi_spec_dirs)")
	stdout := gen.Flags().Bool("stdout", false, "print the spec instead of writing it")
	cfgPath := addConfigFlag(gen, "its rdma.sys_root and rdma.dev_root")
	out := addOutputFlag(gen, false)
	gen.RunE = func(cmd *cobra.Command, _ []string) error {
		return cdiGenerate(cmd, configPath(*cfgPath), *dir, *stdout, *out)
	}
	return newGroupCmd("cdi", "Container Device Interface specs of the node's RDMA devices", "", gen)
}

// cdiReport is `cdi generate -o json` without --stdout.
type cdiReport struct {
	Path    string   `json:"path"`
	Devices []string `json:"devices"`
	Spec    any      `json:"spec"`
}

func cdiGenerate(cmd *cobra.Command, cfgPath, dir string, stdout bool, out outputFormat) error {
	w := cmd.OutOrStdout()
	c, err := config.Load(cfgPath)
	if err != nil {
		return err
	}
	inv, err := rdma.Discover(c.RDMA.SysRoot, c.RDMA.DevRoot)
	if err != nil {
		return err
	}
	inv = inv.Aside(hooks.IsPodLink) // a pod's own devices are not the node's to offer
	s, err := cdispec.Spec(inv)
	if err != nil {
		return err
	}
	if stdout {
		if out == outputJSON {
			return writeJSON(w, s)
		}
		b, err := yaml.Marshal(s)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	path, err := cdispec.Write(dir, s)
	if err != nil {
		return err
	}
	names := []string{}
	for _, d := range inv.Devices {
		names = append(names, cdispec.Name(d.Name))
	}
	if out == outputJSON {
		return writeJSON(w, cdiReport{Path: path, Devices: names, Spec: s})
	}
	fmt.Fprintf(w, "wrote %s: %s\n", path, strings.Join(names, ", "))
	return nil
}

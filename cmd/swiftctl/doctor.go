package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/swift-rdma/swift-containerd/doctor"
)

func newDoctorCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "doctor",
		Short: "Check this node: RDMA, limits, cgroups, node config, containerd, runc",
		Long: `Check this node: the RDMA kernel support and devices, memlock limits,
cgroups, the node config, the tenant policy and keyrings, the verbs cache,
containerd and runc. Each check prints OK, WARN or FAIL with the fix; the
command exits 1 when a check FAILs.

With -o json it prints an array of {check, status, detail, fix}.`,
		Args: noArgs,
	}
	n := doctor.DefaultNode()
	cfgPath := addConfigFlag(c, "")
	out := addOutputFlag(c, true)
	c.Flags().StringVar(&n.Containerd, "containerd", n.Containerd, "containerd binary whose version is checked (name on PATH or path; by default the running containerd's binary when there is one)")
	c.Flags().StringVar(&n.Runc, "runc", n.Runc, "runc binary whose version is checked (name on PATH or path)")
	c.Flags().StringVar(&n.SysRoot, "sys-root", "", "root under which sys/class/... is read (default: the node config's rdma.sys_root)")
	c.Flags().StringVar(&n.DevRoot, "dev-root", "", "where infiniband/* device nodes are checked (default: the node config's rdma.dev_root)")
	c.Flags().StringVar(&n.CgroupRoot, "cgroup-root", n.CgroupRoot, "where cgroups are mounted")
	c.Flags().StringVar(&n.ContainerdPIDFile, "containerd-pid-file", n.ContainerdPIDFile,
		"pid file of the running containerd, whose limits, capabilities and PATH the shim inherits (else the process named containerd)")
	c.Flags().StringVar(&n.ContainerdConfig, "containerd-config", "",
		"containerd's root config (default: the --config the running containerd was started with, else /etc/containerd/config.toml)")
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		n.ConfigPath = configPath(*cfgPath)
		rs := doctor.Run(cmd.Context(), n)
		var err error
		if *out == outputJSON {
			err = doctor.WriteJSON(cmd.OutOrStdout(), rs)
		} else {
			err = doctor.WriteText(cmd.OutOrStdout(), rs)
		}
		if err != nil {
			return err
		}
		if doctor.Failed(rs) {
			failed := 0
			for _, r := range rs {
				if r.Status == doctor.Fail {
					failed++
				}
			}
			return &checkFailed{fmt.Errorf("%d check(s) failed", failed)}
		}
		return nil
	}
	return c
}

package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/hooks"
	"github.com/swift-rdma/swift-containerd/rdma"
)

func newConfigCmd() *cobra.Command {
	check := &cobra.Command{
		Use:   "check [FILE]",
		Short: "Validate a node config",
		Long: `Validate a node config: FILE, else $SWIFT_CONFIG, else /etc/swift/config.toml.
Every problem is named by its line and key. A file that does not exist is
an error (exit 5; the shim would run with the built-in defaults), and so
is a tenant policy the config names (policy_path, or $SWIFT_POLICY) that
does not exist (exit 4: the shim refuses every opted-in container then).`,
		Args: argsRange(0, 1),
	}
	out := addOutputFlag(check, false)
	check.RunE = func(cmd *cobra.Command, args []string) error {
		path := config.PathFromEnv()
		if len(args) > 0 {
			path = args[0]
		}
		return configCheck(cmd, path, *out)
	}
	return newGroupCmd("config", "Validate the node config", "", check)
}

// configReport is `config check -o json`.
type configReport struct {
	Path string `json:"path"`
	// PolicyPath is the tenant policy in force (policy_path, or
	// $SWIFT_POLICY); null when the node runs without one.
	PolicyPath *string `json:"policy_path"`
	RDMA       struct {
		Default bool `json:"default"`
		// Memlock is RLIMIT_MEMLOCK in bytes, null for unlimited.
		Memlock *uint64 `json:"memlock"`
		// HCAHandle and HCAObject are the rdma cgroup limits, null for none.
		HCAHandle *uint64 `json:"hca_handle"`
		HCAObject *uint64 `json:"hca_object"`
	} `json:"rdma"`
}

func configCheck(cmd *cobra.Command, path string, out outputFormat) error {
	w := cmd.OutOrStdout()
	c, err := config.Check(path)
	if err != nil {
		return err
	}
	if out == outputJSON {
		var r configReport
		r.Path, r.PolicyPath = path, strOrNull(c.PolicyFile())
		r.RDMA.Default = c.RDMA.Default
		r.RDMA.Memlock = limitOrNull(c.MemlockBytes())
		r.RDMA.HCAHandle = limitOrNull(uint64(max(c.RDMA.HCAHandle, 0)))
		r.RDMA.HCAObject = limitOrNull(uint64(max(c.RDMA.HCAObject, 0)))
		return writeJSON(w, r)
	}
	fmt.Fprintf(w, "%s: ok (rdma default=%v, memlock=%s, hca_handle=%d, hca_object=%d)\n",
		path, c.RDMA.Default, c.RDMA.Memlock, c.RDMA.HCAHandle, c.RDMA.HCAObject)
	return nil
}

func newDevicesCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "devices",
		Short: "List the node's RDMA devices and their uverbs nodes",
		Long: `List the node's RDMA devices (sysfs under the node config's rdma.sys_root),
their uverbs device nodes and numbers, the rdma_cm node, and whether the
rdma cgroup controller is available.`,
		Args: noArgs,
	}
	cfgPath := addConfigFlag(c, "its rdma.sys_root and rdma.dev_root")
	out := addOutputFlag(c, false)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		return devices(cmd, configPath(*cfgPath), *out)
	}
	return c
}

// deviceNode is a character device node in `devices -o json`.
type deviceNode struct {
	Path     string `json:"path"`
	HostPath string `json:"host_path"`
	Major    uint32 `json:"major"`
	Minor    uint32 `json:"minor"`
}

// devicesReport is `devices -o json`.
type devicesReport struct {
	Devices []deviceInfo `json:"devices"`
	// RDMACM is the rdma_cm node, null when the node has none.
	RDMACM *deviceNode `json:"rdma_cm"`
	// RDMACgroup tells whether the rdma cgroup controller is available.
	RDMACgroup bool `json:"rdma_cgroup"`
}

type deviceInfo struct {
	Name      string     `json:"name"`
	NodeGUID  string     `json:"node_guid"`
	FWVersion string     `json:"fw_version"`
	Uverbs    deviceNode `json:"uverbs"`
}

func nodeOf(n rdma.Node) deviceNode {
	return deviceNode{Path: n.Path, HostPath: n.HostPath, Major: n.Major, Minor: n.Minor}
}

func devices(cmd *cobra.Command, cfgPath string, out outputFormat) error {
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
	cgroup := rdma.CgroupAvailable("/sys/fs/cgroup")
	if out == outputJSON {
		r := devicesReport{Devices: []deviceInfo{}, RDMACgroup: cgroup}
		for _, d := range inv.Devices {
			r.Devices = append(r.Devices, deviceInfo{Name: d.Name, NodeGUID: d.NodeGUID, FWVersion: d.FWVersion, Uverbs: nodeOf(d.Uverbs)})
		}
		if inv.RDMACM != nil {
			n := nodeOf(*inv.RDMACM)
			r.RDMACM = &n
		}
		return writeJSON(w, r)
	}
	if len(inv.Devices) == 0 {
		fmt.Fprintln(w, "no RDMA devices on this node")
	}
	for _, d := range inv.Devices {
		fmt.Fprintf(w, "%s\t%s\t%d:%d\tguid=%s fw=%s\n", d.Name, d.Uverbs.HostPath, d.Uverbs.Major, d.Uverbs.Minor, d.NodeGUID, d.FWVersion)
	}
	if inv.RDMACM != nil {
		fmt.Fprintf(w, "rdma_cm\t%s\t%d:%d\n", inv.RDMACM.HostPath, inv.RDMACM.Major, inv.RDMACM.Minor)
	}
	fmt.Fprintf(w, "rdma cgroup controller: %v\n", cgroup)
	return nil
}

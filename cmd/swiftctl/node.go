package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/swift-rdma/swift-containerd/config"
	"github.com/swift-rdma/swift-containerd/rdma"
)

func cmdConfig(args []string) error {
	if len(args) < 1 || args[0] != "check" {
		return fmt.Errorf("usage: swiftctl config check [FILE]")
	}
	path := config.PathFromEnv()
	if len(args) > 1 {
		path = args[1]
	}
	if _, err := os.Stat(path); err != nil {
		fmt.Printf("%s: not present, defaults apply\n", path)
	}
	c, err := config.Load(path)
	if err != nil {
		return err
	}
	fmt.Printf("%s: ok (rdma default=%v, memlock=%s, hca_handle=%d, hca_object=%d)\n",
		path, c.RDMA.Default, c.RDMA.Memlock, c.RDMA.HCAHandle, c.RDMA.HCAObject)
	return nil
}

func cmdDevices(args []string) error {
	fs := flag.NewFlagSet("devices", flag.ContinueOnError)
	cfgPath := fs.String("config", config.PathFromEnv(), "node config")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	inv, err := rdma.Discover(c.RDMA.SysRoot, c.RDMA.DevRoot)
	if err != nil {
		return err
	}
	if len(inv.Devices) == 0 {
		fmt.Println("no RDMA devices on this node")
	}
	for _, d := range inv.Devices {
		fmt.Printf("%s\t%s\t%d:%d\tguid=%s fw=%s\n", d.Name, d.Uverbs.HostPath, d.Uverbs.Major, d.Uverbs.Minor, d.NodeGUID, d.FWVersion)
	}
	if inv.RDMACM != nil {
		fmt.Printf("rdma_cm\t%s\t%d:%d\n", inv.RDMACM.HostPath, inv.RDMACM.Major, inv.RDMACM.Minor)
	}
	fmt.Printf("rdma cgroup controller: %v\n", rdma.CgroupAvailable("/sys/fs/cgroup"))
	return nil
}

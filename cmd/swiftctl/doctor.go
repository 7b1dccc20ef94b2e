package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/containerd/errdefs"
	"github.com/swift-rdma/swift-containerd/doctor"
)

// cmdDoctor is `swiftctl doctor`: it prints the node report and tells
// whether any check failed (the caller exits non-zero then).
func cmdDoctor(ctx context.Context, w io.Writer, args []string) (failed bool, err error) {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	n := doctor.DefaultNode()
	asJSON := fs.Bool("json", false, "print a JSON array of {check, status, detail, fix}")
	fs.StringVar(&n.ConfigPath, "config", n.ConfigPath, "node config")
	fs.StringVar(&n.Containerd, "containerd", n.Containerd, "containerd binary whose version is checked (name on PATH or path)")
	fs.StringVar(&n.Runc, "runc", n.Runc, "runc binary whose version is checked (name on PATH or path)")
	fs.StringVar(&n.SysRoot, "sys-root", "", "root under which sys/class/... is read (default: the node config's rdma.sys_root)")
	fs.StringVar(&n.DevRoot, "dev-root", "", "where infiniband/* device nodes are checked (default: the node config's rdma.dev_root)")
	fs.StringVar(&n.CgroupRoot, "cgroup-root", n.CgroupRoot, "where cgroups are mounted")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	if fs.NArg() > 0 {
		return false, fmt.Errorf("unexpected arguments %q: %w", fs.Args(), errdefs.ErrInvalidArgument)
	}
	rs := doctor.Run(ctx, n)
	if *asJSON {
		err = doctor.WriteJSON(w, rs)
	} else {
		err = doctor.WriteText(w, rs)
	}
	return doctor.Failed(rs), err
}

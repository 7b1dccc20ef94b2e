package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/containerd/errdefs"
	"github.com/swift-rdma/swift-containerd/install"
)

// cmdInstall is `swiftctl install containerd`.
func cmdInstall(args []string) error {
	return installCommand(os.Stdout, "install", args)
}

// cmdUninstall is `swiftctl uninstall containerd`.
func cmdUninstall(args []string) error {
	return installCommand(os.Stdout, "uninstall", args)
}

func installCommand(w io.Writer, verb string, args []string) error {
	if len(args) < 1 || args[0] != "containerd" {
		return fmt.Errorf("usage: swiftctl %s containerd [flags] (see swiftctl %s containerd -h): %w", verb, verb, errdefs.ErrInvalidArgument)
	}
	fs := flag.NewFlagSet(verb+" containerd", flag.ContinueOnError)
	var o install.Options
	fs.StringVar(&o.ConfigPath, "config", install.DefaultConfigPath, "containerd's root config")
	fs.StringVar(&o.RuntimeName, "runtime-name", install.DefaultRuntimeName, "runtime entry name (the RuntimeClass handler)")
	dryRun := fs.Bool("dry-run", false, "print the change as a unified diff and write nothing")
	if verb == "install" {
		fs.StringVar(&o.SwiftConfig, "swift-config", install.DefaultSwiftConfig, "node config path the runtime entry passes to the shim (SwiftConfig)")
		fs.StringVar(&o.BinaryName, "runc", install.DefaultBinaryName, "runc binary of the runtime entry (BinaryName)")
		fs.BoolVar(&o.SystemdCgroup, "systemd-cgroup", false, "runc's SystemdCgroup option of the runtime entry")
		fs.IntVar(&o.Version, "version", 0, "expected containerd config version (2: containerd 1.7; 3 or 4: containerd 2.x); creates a missing root config")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: %w", fs.Args(), errdefs.ErrInvalidArgument)
	}
	var plan *install.Plan
	var err error
	if verb == "install" {
		plan, err = install.PlanInstall(o)
	} else {
		plan, err = install.PlanUninstall(o)
	}
	if err != nil {
		return err
	}
	return reportPlan(w, verb, o, plan, *dryRun)
}

func reportPlan(w io.Writer, verb string, o install.Options, plan *install.Plan, dryRun bool) error {
	if o.RuntimeName == "" {
		o.RuntimeName = install.DefaultRuntimeName
	}
	if plan.Empty() {
		if verb == "install" {
			fmt.Fprintf(w, "runtime %q is already installed (%s): nothing changed\n", o.RuntimeName, plan.DropIn)
		} else {
			fmt.Fprintf(w, "runtime %q is not installed: nothing changed\n", o.RuntimeName)
		}
		return nil
	}
	if dryRun {
		fmt.Fprint(w, plan.Diff())
	} else if err := plan.Apply(); err != nil {
		return err
	}
	prefix := ""
	if dryRun {
		prefix = "would "
	}
	for _, c := range plan.Changes {
		fmt.Fprintf(w, "%s%s: %s\n", prefix, c.What, c.Path)
	}
	for _, n := range plan.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if dryRun {
		fmt.Fprintln(w, "dry run: nothing written")
		return nil
	}
	fmt.Fprintln(w, "restart containerd to apply (systemctl restart containerd)")
	return nil
}

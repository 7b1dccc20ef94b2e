package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/containerd/errdefs"
	"github.com/spf13/cobra"

	"github.com/swift-rdma/swift-containerd/install"
)

// newInstallCmd is `swiftctl install containerd` or `swiftctl uninstall
// containerd` (verb).
func newInstallCmd(verb string) *cobra.Command {
	c := &cobra.Command{
		Use:  "containerd",
		Args: noArgs,
	}
	var o install.Options
	c.Flags().StringVar(&o.ConfigPath, "config", install.DefaultConfigPath, "containerd's root config")
	c.Flags().StringVar(&o.RuntimeName, "runtime-name", install.DefaultRuntimeName, "runtime entry name (the RuntimeClass handler)")
	dryRun := c.Flags().Bool("dry-run", false, "print the change as a unified diff and write nothing")
	output := c.Flags().StringP("output", "o", "", "json: report the change as one JSON object (the node installer reads it)")
	group := "Add the swift runtime to containerd's config"
	if verb == "install" {
		c.Short = "Add the swift runtime to containerd's config (a conf.d drop-in)"
		c.Long = `Add the swift runtime to containerd's config: a drop-in in the conf.d
directory next to containerd's root config, imported from it. The entry
copies the options of the node's runc entry; --runc and --systemd-cgroup
override them. Run it again with another --runtime-name (and its own
--swift-config, and --cni-conf-dir for its pods' own CNI network) for a
second entry, such as swift-podnet. --dry-run prints the change as a unified
diff and writes nothing. Restart containerd to apply it.`
		c.Flags().StringVar(&o.SwiftConfig, "swift-config", install.DefaultSwiftConfig, "node config path the runtime entry passes to the shim (SwiftConfig)")
		c.Flags().StringVar(&o.BinaryName, "runc", "",
			"runc binary of the runtime entry (BinaryName), an executable file (default: the node's runc entry's, else "+install.DefaultBinaryName+")")
		c.Flags().StringVar(&o.Shim, "shim", "",
			"the shim the runtime entry runs (runtime_path), an executable file (default: containerd-shim-swift-v2 from containerd's PATH)")
		c.Flags().BoolVar(&o.SystemdCgroup, "systemd-cgroup", false, "set runc's SystemdCgroup option of the runtime entry (default: the node's runc entry's)")
		c.Flags().StringVar(&o.CNIConfDir, "cni-conf-dir", "",
			"CNI config directory of the entry's pods: an absolute path of an existing directory only root may write (containerd's per-runtime cni_conf_dir, containerd 2.x; default: the node's default CNI config)")
		c.Flags().IntVar(&o.Version, "version", 0, "expected containerd config version (2: containerd 1.7; 3 or 4: containerd 2.x); creates a missing root config")
	} else {
		group = "Remove the swift runtime from containerd's config"
		c.Short = "Remove what install containerd added to containerd's config"
		c.Long = `Remove what "swiftctl install containerd" added: the drop-in and its import
(which stays while another Swift entry's drop-in uses it), restoring
containerd's config. --dry-run prints the change as a unified
diff and writes nothing.`
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error {
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
		switch *output {
		case "":
			return reportPlan(cmd.OutOrStdout(), verb, o, plan, *dryRun)
		case "json":
			return reportJSON(cmd.OutOrStdout(), o, plan, *dryRun)
		}
		return fmt.Errorf("--output %q: want json or nothing: %w", *output, errdefs.ErrInvalidArgument)
	}
	return newGroupCmd(verb, group, "", c)
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

func reportJSON(w io.Writer, o install.Options, plan *install.Plan, dryRun bool) error {
	if !dryRun && !plan.Empty() {
		if err := plan.Apply(); err != nil {
			return err
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(plan.Report(o.RuntimeName, dryRun))
}

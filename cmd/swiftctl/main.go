// Command swiftctl is the operator CLI of the Swift runtime: node checks,
// config and tenant policy validation, the lease ledger (pools), the verbs
// cache, tenant keyrings, CDI specs and containerd installation.
//
// Every command takes --help; commands that read state print JSON with
// -o json. The exit codes are listed in rootLong (swiftctl --help).
package main

import (
	"context"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swift-rdma/swift-containerd/internal/version"
	"github.com/swift-rdma/swift-containerd/ledger"
)

const rootLong = `swiftctl is the operator CLI of Swift for containerd (the runtime shim
containerd-shim-swift-v2): it checks the node and its config, validates
tenant policies, shows and repairs the RDMA lease ledger, builds the verbs
cache, manages tenant keyrings, writes the CDI spec of the node's RDMA
devices and adds the runtime to containerd's config.

Flags go before or after arguments. Commands that read state print JSON
with -o json; "no limit" and "no quota" values are null there. The node
config is $SWIFT_CONFIG or /etc/swift/config.toml unless --config names
another (install and uninstall: --config is containerd's config).

Exit codes:
  0  success
  1  failure: a check failed (doctor, cache check), or an error of no class below
  2  usage: unknown command or flag, wrong number of arguments, bad flag value
  3  invalid argument: a malformed node config, tenant policy, keyring or other input
  4  failed precondition: the node is not as the command needs it (a configured
     tenant policy missing, no RDMA devices, an unmet requirement)
  5  not found: a file, verbs cache or binary that the command needs does not exist
  6  data loss: a corrupt ledger or verbs cache
  7  unavailable: containerd (or the kernel's RDMA netlink) cannot be reached
  8  permission denied

A failure is printed to stderr as "swiftctl: MESSAGE"; with -o json it is
printed to stdout as {"error": "MESSAGE", "class": "failed precondition",
"exit_code": 4} (class is null for an error of no class).`

func main() {
	ledger.RunCheckIfAsked() // a ledger check in a process of its own
	os.Exit(execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// execute runs swiftctl with args, prints a failure for a person (or as
// JSON with -o json) and returns the exit code.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd, err := run(ctx, args, stdout, stderr)
	if err == nil {
		return exitOK
	}
	return report(cmd, err, stdout, stderr)
}

// run runs swiftctl with args and returns the command that ran (or failed
// to) and its error. An error before the command's own code ran (an
// unknown command or flag, a bad flag value, wrong arguments) is a
// usageError.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (*cobra.Command, error) {
	root, ran := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(os.Stdin)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil && !*ran {
		err = asUsage(err)
	}
	return cmd, err
}

// newRootCmd returns the command tree; *ran turns true when a command's
// own code starts (its flags and arguments were accepted).
func newRootCmd() (*cobra.Command, *bool) {
	ran := new(bool)
	info := version.Get("swiftctl")
	root := &cobra.Command{
		Use:   "swiftctl",
		Short: "Operate Swift, the RDMA runtime for containerd, on this node",
		Long:  rootLong,
		// a command line without a command is a usage error (exit 2); an
		// unknown command is one too (cobra's check of the root's args)
		RunE: func(cmd *cobra.Command, args []string) error {
			return usagef("missing command")
		},
		PersistentPreRun: func(*cobra.Command, []string) { *ran = true },
		Version:          info.Version,
		SilenceErrors:    true,
		SilenceUsage:     true,
	}
	root.SetVersionTemplate(versionText(info))
	root.SetHelpCommand(newHelpCmd())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return asUsage(err) })
	root.AddGroup(
		&cobra.Group{ID: "node", Title: "Node:"},
		&cobra.Group{ID: "tenants", Title: "Tenants and leases:"},
		&cobra.Group{ID: "setup", Title: "Set-up:"},
	)
	for _, c := range []struct {
		group string
		cmd   *cobra.Command
	}{
		{"node", newDoctorCmd()},
		{"node", newDevicesCmd()},
		{"node", newConfigCmd()},
		{"node", newCacheCmd()},
		{"tenants", newPolicyCmd()},
		{"tenants", newPoolsCmd()},
		{"tenants", newKeysCmd()},
		{"setup", newCDICmd()},
		{"setup", newInstallCmd("install")},
		{"setup", newInstallCmd("uninstall")},
		{"", newVersionCmd()},
	} {
		c.cmd.GroupID = c.group
		root.AddCommand(c.cmd)
	}
	return root, ran
}

// newHelpCmd is `swiftctl help [COMMAND]`: cobra's, but an unknown topic
// is a usage error (exit 2).
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [COMMAND]",
		Short: "Help about any command",
		Long:  "Help about any command: the same as COMMAND --help.",
		Args:  cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return usagef("unknown help topic %q", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	}
}

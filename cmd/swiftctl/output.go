package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/swift-rdma/swift-containerd/config"
)

// outputFormat is the value of -o/--output.
type outputFormat string

// Output formats.
const (
	outputText outputFormat = "text"
	outputJSON outputFormat = "json"
)

func (o *outputFormat) String() string { return string(*o) }
func (o *outputFormat) Type() string   { return "text|json" }

func (o *outputFormat) Set(s string) error {
	switch outputFormat(s) {
	case outputText, outputJSON:
		*o = outputFormat(s)
		return nil
	}
	return fmt.Errorf("%q is not an output format: want text or json", s)
}

// jsonAlias is --json, kept for scripts: the same as -o json.
type jsonAlias struct{ o *outputFormat }

func (j jsonAlias) String() string { return "false" }
func (j jsonAlias) Type() string   { return "bool" }

func (j jsonAlias) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	if b {
		*j.o = outputJSON
	}
	return nil
}

// addOutputFlag adds -o/--output to c; jsonAlias also adds the hidden
// --json of earlier releases.
func addOutputFlag(c *cobra.Command, jsonFlag bool) *outputFormat {
	o := outputText
	c.Flags().VarP(&o, "output", "o", "output format: text or json")
	if jsonFlag {
		f := c.Flags().VarPF(jsonAlias{&o}, "json", "", "the same as -o json")
		f.NoOptDefVal = "true"
		_ = c.Flags().MarkHidden("json")
	}
	return &o
}

// outputOf is the output format cmd was asked for (text when it has no -o).
func outputOf(cmd *cobra.Command) outputFormat {
	if cmd == nil {
		return outputText
	}
	if f := cmd.Flags().Lookup("output"); f != nil && f.Value.String() == string(outputJSON) {
		return outputJSON
	}
	return outputText
}

// writeJSON prints v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// addConfigFlag adds --config, the node config, to c.
func addConfigFlag(c *cobra.Command, what string) *string {
	p := new(string)
	usage := "node config (default $" + config.EnvPath + " or " + config.DefaultPath + ")"
	if what != "" {
		usage = "node config: " + what + " (default $" + config.EnvPath + " or " + config.DefaultPath + ")"
	}
	c.Flags().StringVar(p, "config", "", usage)
	return p
}

// configPath is the --config value, else $SWIFT_CONFIG, else the default
// (read when the command runs, not when the tree is built).
func configPath(flag string) string {
	if flag != "" {
		return flag
	}
	return config.PathFromEnv()
}

// limitOrNull is a limit for JSON: null for 0 (none) and for unlimited.
func limitOrNull(n uint64) *uint64 {
	if n == 0 || n == config.MemlockUnlimited {
		return nil
	}
	return &n
}

// Argument checks: each returns a usageError naming what the command takes.

// noArgs accepts no positional argument.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %s", commandName(cmd), quoteAll(args))
	}
	return nil
}

// argsRange accepts min to max positional arguments.
func argsRange(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) >= min && len(args) <= max {
			return nil
		}
		want := strings.TrimSpace(strings.TrimPrefix(cmd.Use, cmd.Name()))
		got := "no arguments"
		if len(args) > 0 {
			got = fmt.Sprintf("%d argument(s): %s", len(args), quoteAll(args))
		}
		return usagef("%s takes %s, got %s", commandName(cmd), want, got)
	}
}

// commandName is cmd's path without the program's name ("keys show").
func commandName(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return cmd.Name()
	}
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

func quoteAll(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " ")
}

// newGroupCmd is a command whose subcommands do the work: run alone or
// with an unknown subcommand, it is a usage error.
func newGroupCmd(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:                   use,
		Short:                 short,
		Long:                  long,
		Args:                  cobra.ArbitraryArgs,
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			var names []string
			for _, s := range cmd.Commands() {
				if s.IsAvailableCommand() {
					names = append(names, s.Name())
				}
			}
			if len(args) == 0 {
				return usagef("%s needs a command: %s", commandName(cmd), strings.Join(names, ", "))
			}
			msg := fmt.Sprintf("unknown command %q for %q (commands: %s)", args[0], cmd.CommandPath(), strings.Join(names, ", "))
			if cmd.SuggestionsMinimumDistance <= 0 {
				cmd.SuggestionsMinimumDistance = 2
			}
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return usagef("%s", msg)
		},
	}
	c.AddCommand(subs...)
	return c
}

package main

import (
	"bytes"

	"github.com/spf13/cobra"

	"github.com/swift-rdma/swift-containerd/internal/version"
)

func newVersionCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "version",
		Short: "Print swiftctl's version and the containerd library it links",
		Long: `Print swiftctl's version (stamped at build time from git describe; a
build without it reports its VCS revision, else "dev"), the version of the
containerd library linked into it, and the Go version that built it.`,
		Args: noArgs,
	}
	out := addOutputFlag(c, false)
	c.RunE = func(cmd *cobra.Command, _ []string) error {
		info := version.Get("swiftctl")
		if *out == outputJSON {
			return info.WriteJSON(cmd.OutOrStdout())
		}
		return info.WriteText(cmd.OutOrStdout())
	}
	return c
}

// versionText is what --version prints: the same as `swiftctl version`.
func versionText(info version.Info) string {
	var b bytes.Buffer
	_ = info.WriteText(&b)
	return b.String()
}

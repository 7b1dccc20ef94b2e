package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/swift-rdma/swift-containerd/keys"
)

const keysLong = `A tenant keyring: the keys with which the tenant's zygotes on every node
authenticate each other. Give every node the same file (see the README).
  gen     write a new ring with one random key (refuses to overwrite without --force)
  rotate  put a new key first (the one zygotes dial with) and keep at most N (default 2)
  show    print each key's id and fingerprint (never the key), the dialing one first`

func newKeysCmd() *cobra.Command {
	gen := &cobra.Command{
		Use:   "gen FILE",
		Short: "Write a new keyring with one random key",
		Long: `Write a new keyring FILE (mode 0400) with one random key, and show it.
An existing FILE is kept unless --force: rotate it instead.`,
		Args: argsRange(1, 1),
	}
	genID := gen.Flags().String("id", "", "key id (default: the date and time)")
	force := gen.Flags().Bool("force", false, "overwrite an existing file")
	genOut := addOutputFlag(gen, false)
	gen.RunE = func(cmd *cobra.Command, args []string) error {
		path := args[0]
		if _, err := os.Stat(path); err == nil && !*force {
			return fmt.Errorf("keys gen: %s exists (rotate it, or --force to replace it)", path)
		} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("keys gen: %w", err)
		}
		k, err := keys.New(*genID)
		if err != nil {
			return err
		}
		if err := keys.Write(path, keys.Ring{k}); err != nil {
			return fmt.Errorf("keys gen: %w", err)
		}
		return show(cmd.OutOrStdout(), path, *genOut)
	}

	rotate := &cobra.Command{
		Use:   "rotate FILE",
		Short: "Put a new key first in a keyring and keep at most N",
		Long: `Put a new key first in the keyring FILE (the key zygotes dial with; the
others are still accepted), keep at most --keep keys, and show the ring.`,
		Args: argsRange(1, 1),
	}
	rotID := rotate.Flags().String("id", "", "key id (default: the date and time)")
	keep := rotate.Flags().Int("keep", 2, "keys to keep, the new one included")
	rotOut := addOutputFlag(rotate, false)
	rotate.RunE = func(cmd *cobra.Command, args []string) error {
		path := args[0]
		r, err := keys.Read(path)
		if err != nil {
			return fmt.Errorf("keys rotate: %w", err)
		}
		k, err := keys.New(*rotID)
		if err != nil {
			return err
		}
		if r, err = r.Rotate(k, *keep); err != nil {
			return fmt.Errorf("keys rotate: %w", err)
		}
		if err := keys.Write(path, r); err != nil {
			return fmt.Errorf("keys rotate: %w", err)
		}
		return show(cmd.OutOrStdout(), path, *rotOut)
	}

	showCmd := &cobra.Command{
		Use:   "show FILE",
		Short: "Print each key's id and fingerprint (never the key)",
		Long: `Print each key of the keyring FILE: its id, its fingerprint (the first 16
hex digits of its SHA-256; never the key) and its role, the dialing key first.`,
		Args: argsRange(1, 1),
	}
	showOut := addOutputFlag(showCmd, false)
	showCmd.RunE = func(cmd *cobra.Command, args []string) error {
		return show(cmd.OutOrStdout(), args[0], *showOut)
	}
	return newGroupCmd("keys", "Manage tenant keyrings for the zygotes of every node", keysLong, gen, rotate, showCmd)
}

// keyInfo is one key in `keys show -o json`: never the key itself.
type keyInfo struct {
	ID          string `json:"id"`
	Fingerprint string `json:"fingerprint"`
	// Dial marks the key zygotes dial with (the first); all are accepted.
	Dial bool `json:"dial"`
}

// keyringReport is `keys show -o json`.
type keyringReport struct {
	File string    `json:"file"`
	Keys []keyInfo `json:"keys"`
}

func show(w io.Writer, path string, out outputFormat) error {
	r, err := keys.Read(path)
	if err != nil {
		return err
	}
	if out == outputJSON {
		rep := keyringReport{File: path, Keys: []keyInfo{}}
		for i, k := range r {
			rep.Keys = append(rep.Keys, keyInfo{ID: k.ID, Fingerprint: k.Fingerprint(), Dial: i == 0})
		}
		return writeJSON(w, rep)
	}
	for i, k := range r {
		role := "accepted"
		if i == 0 {
			role = "dial, accepted"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", k.ID, k.Fingerprint(), role)
	}
	return nil
}

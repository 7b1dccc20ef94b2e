package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/swift-rdma/swift-containerd/keys"
)

const keysUsage = `usage: swiftctl keys gen [--id ID] [--force] FILE
       swiftctl keys rotate [--id ID] [--keep N] FILE
       swiftctl keys show FILE

A tenant keyring: the keys with which the tenant's zygotes on every node
authenticate each other. Give every node the same file (see the README).
  gen     write a new ring with one random key (refuses to overwrite without --force)
  rotate  put a new key first (the one zygotes dial with) and keep at most N (default 2)
  show    print each key's id and fingerprint (never the key), the dialing one first
`

func cmdKeys(w io.Writer, args []string) error {
	if len(args) < 1 {
		fmt.Fprint(os.Stderr, keysUsage)
		return errors.New("keys: missing subcommand")
	}
	fl := flag.NewFlagSet("keys "+args[0], flag.ContinueOnError)
	id := fl.String("id", "", "key id (default: the date and time)")
	force := fl.Bool("force", false, "gen: overwrite an existing file")
	keep := fl.Int("keep", 2, "rotate: keys to keep, the new one included")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	if fl.NArg() != 1 {
		fmt.Fprint(os.Stderr, keysUsage)
		return fmt.Errorf("keys %s: want one FILE", args[0])
	}
	path := fl.Arg(0)
	switch args[0] {
	case "gen":
		if _, err := os.Stat(path); err == nil && !*force {
			return fmt.Errorf("keys gen: %s exists (rotate it, or --force to replace it)", path)
		} else if err != nil && !errors.Is(err, errNotExist) {
			return fmt.Errorf("keys gen: %w", err)
		}
		k, err := keys.New(*id)
		if err != nil {
			return err
		}
		if err := keys.Write(path, keys.Ring{k}); err != nil {
			return fmt.Errorf("keys gen: %w", err)
		}
		return show(w, path)
	case "rotate":
		r, err := keys.Read(path)
		if err != nil {
			return fmt.Errorf("keys rotate: %w", err)
		}
		k, err := keys.New(*id)
		if err != nil {
			return err
		}
		if r, err = r.Rotate(k, *keep); err != nil {
			return fmt.Errorf("keys rotate: %w", err)
		}
		if err := keys.Write(path, r); err != nil {
			return fmt.Errorf("keys rotate: %w", err)
		}
		return show(w, path)
	case "show":
		return show(w, path)
	}
	fmt.Fprint(os.Stderr, keysUsage)
	return fmt.Errorf("keys: unknown subcommand %q", args[0])
}

var errNotExist = fs.ErrNotExist

func show(w io.Writer, path string) error {
	r, err := keys.Read(path)
	if err != nil {
		return err
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

// Command benchkeys checks that benchmark output holds every figure the
// documentation promises: each `fork.*`, `verbs.*`, `data.*`, `shim.*`, `k8s.*` and `invoke.*`
// key written in backquotes in the given Markdown files must be a number
// in one of the given JSON files (make bench's out/bench.json, or the
// smoke outputs of make test).
//
//	benchkeys -doc README.md -doc docs/benchmarks.md out/bench.json ...
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

type docs []string

func (d *docs) String() string     { return strings.Join(*d, ",") }
func (d *docs) Set(v string) error { *d = append(*d, v); return nil }

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchkeys:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	var d docs
	fs := flag.NewFlagSet("benchkeys", flag.ContinueOnError)
	fs.Var(&d, "doc", "a Markdown file whose backquoted figure keys must be present (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(d) == 0 || fs.NArg() == 0 {
		return errors.New("usage: benchkeys -doc FILE.md [-doc ...] BENCH.json [...]")
	}
	var text strings.Builder
	for _, f := range d {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		text.Write(b)
	}
	figures := map[string]any{}
	for _, f := range fs.Args() {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		m := map[string]any{}
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		for k, v := range m {
			figures[k] = v
		}
	}
	keys := DocumentedKeys(text.String())
	if len(keys) == 0 {
		return fmt.Errorf("%s name no figure keys", strings.Join(d, ", "))
	}
	if missing := Missing(keys, figures); len(missing) > 0 {
		return fmt.Errorf("%d of %d documented figures missing or not numbers in %s: %s", len(missing), len(keys),
			strings.Join(fs.Args(), ", "), strings.Join(missing, ", "))
	}
	fmt.Fprintf(out, "benchkeys: all %d documented figures present in %s\n", len(keys), strings.Join(fs.Args(), ", "))
	return nil
}

var keyRE = regexp.MustCompile("`((?:fork|verbs|data|shim|k8s|invoke)\\.[a-z0-9_.]*[a-z0-9_])`")

// DocumentedKeys returns the figure keys a Markdown text names in
// backquotes, sorted, each once.
func DocumentedKeys(text string) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range keyRE.FindAllStringSubmatch(text, -1) {
		// the CRI plugin's containerd namespace, not a figure
		if m[1] == "k8s.io" {
			continue
		}
		if !seen[m[1]] {
			seen[m[1]] = true
			keys = append(keys, m[1])
		}
	}
	sort.Strings(keys)
	return keys
}

// Missing returns the keys that are not numbers in figures.
func Missing(keys []string, figures map[string]any) []string {
	var missing []string
	for _, k := range keys {
		if _, ok := figures[k].(float64); !ok {
			missing = append(missing, k)
		}
	}
	return missing
}

// Command shimbench measures the Swift shim's container start against
// runc's: `ctr run --rm` of the same container through runc.v2 and swift.v2
// (RDMA off) on a containerd of its own, for `make bench`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/swift-rdma/swift-containerd/test/harness"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := bench(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "shimbench:", err)
		os.Exit(1)
	}
}

// bench measures `ctr run --rm` of the same container through runc.v2 and
// swift.v2 (RDMA off), paired run by run in one process, and merges the
// medians into the bench JSON file.
func bench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("shimbench", flag.ContinueOnError)
	runs := fs.Int("runs", 10, "paired runs (at least 10 for the report)")
	out := fs.String("out", "out/bench.json", "bench JSON file (merged, not replaced)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *runs < 1 {
		return errors.New("--runs must be at least 1")
	}
	dir, err := os.MkdirTemp("", "swift-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d, err := harness.Start(ctx, filepath.Join(dir, "ctrd"), harness.Options{})
	if err != nil {
		return err
	}
	defer d.Stop()
	rootfs := filepath.Join(dir, "rootfs")
	if err := harness.BuildRootfs(rootfs); err != nil {
		return err
	}
	runtimes := []string{"io.containerd.runc.v2", "io.containerd.swift.v2"}
	times := map[string][]float64{}
	// one unmeasured warm-up per runtime: page cache, binaries
	for i := -1; i < *runs; i++ {
		for j, rt := range runtimes {
			// alternate which runtime goes first to cancel drift
			if i%2 == 1 {
				rt = runtimes[1-j]
			}
			id := fmt.Sprintf("bench-%d-%d", i+1, j)
			start := time.Now()
			if _, se, err := d.Ctr(ctx, "run", "--rm", "--runtime", rt, "--rootfs", rootfs, id, "/bin/true"); err != nil {
				return fmt.Errorf("ctr run %s: %v: %s", rt, err, se)
			}
			if i >= 0 {
				times[rt] = append(times[rt], float64(time.Since(start).Microseconds())/1000)
			}
		}
	}
	res := map[string]any{
		"shim.runc_ms":  harness.Median(times[runtimes[0]]),
		"shim.swift_ms": harness.Median(times[runtimes[1]]),
		"shim.runs":     *runs,
	}
	res["shim.ratio"] = res["shim.swift_ms"].(float64) / res["shim.runc_ms"].(float64)
	if err := harness.MergeJSON(*out, res); err != nil {
		return err
	}
	fmt.Printf("shim: runc.v2 %.1f ms, swift.v2 %.1f ms (median of %d paired runs), ratio %.3f -> %s\n",
		res["shim.runc_ms"], res["shim.swift_ms"], *runs, res["shim.ratio"], *out)
	return nil
}

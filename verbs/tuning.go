package verbs

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// TuningEnv returns the environment the profile justifies for containers
// using the cache, with one reason per variable (and per variable left out).
//
// MLX5_STALL_CQ_POLL: without it, mlx5 reads all of /proc/cpuinfo in every
// ibv_open_device to detect Sandy Bridge (where it stalls CQ polling unless
// the process is bound to the device's local CPUs). Off Sandy Bridge the
// answer is always "no stall", so the cache sets MLX5_STALL_CQ_POLL=0; on
// Sandy Bridge the answer depends on each process's CPU affinity and is
// left to mlx5.
func TuningEnv(providers []string, cpuinfo []byte) (map[string]string, []string) {
	env := map[string]string{}
	var reasons []string
	for _, p := range providers {
		if p != "mlx5" {
			continue
		}
		if IsSandyBridge(cpuinfo) {
			reasons = append(reasons, "MLX5_STALL_CQ_POLL not set: Sandy Bridge CPU, mlx5 decides per process from its CPU affinity")
		} else {
			env["MLX5_STALL_CQ_POLL"] = "0"
			reasons = append(reasons, "MLX5_STALL_CQ_POLL=0: not a Sandy Bridge CPU, saves mlx5 reading /proc/cpuinfo at every open")
		}
	}
	return env, reasons
}

// IsSandyBridge mirrors mlx5_is_sandy_bridge (rdma-core providers/mlx5):
// some processor has cpu family 6 and model 0x2A or 0x2D.
func IsSandyBridge(cpuinfo []byte) bool {
	family, model := -1, -1
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		line := sc.Text()
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		n, err := strconv.Atoi(val)
		switch {
		case key == "processor":
			family, model = -1, -1
		case key == "cpu family" && err == nil && family < 0:
			family = n
		case key == "model" && err == nil && model < 0:
			model = n
		}
		if family == 6 && (model == 0x2A || model == 0x2D) {
			return true
		}
	}
	return false
}

package rdma

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// capSysResource is CAP_SYS_RESOURCE's bit number.
const capSysResource = 24

// MemlockLimits returns this process's hard RLIMIT_MEMLOCK and whether it
// holds CAP_SYS_RESOURCE (which lets runc, started by it, go past that).
func MemlockLimits() (hard uint64, canRaise bool) {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err == nil {
		hard = rl.Max
	}
	return hard, hasCap(capSysResource)
}

func hasCap(bit uint) bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && n&(1<<bit) != 0
		}
	}
	return false
}

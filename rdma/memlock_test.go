package rdma

import (
	"testing"

	"golang.org/x/sys/unix"
)

func TestMemlockLimits(t *testing.T) {
	hard, canRaise := MemlockLimits()
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl); err != nil {
		t.Fatal(err)
	}
	if hard != rl.Max {
		t.Errorf("MemlockLimits hard = %d, want %d", hard, rl.Max)
	}
	eff := effectiveCaps(t)
	if want := eff&(1<<unix.CAP_SYS_RESOURCE) != 0; canRaise != want {
		t.Errorf("MemlockLimits canRaise = %v, capget says %v", canRaise, want)
	}
	for bit := uint(0); bit < 41; bit++ {
		if got, want := hasCap(bit), eff&(1<<bit) != 0; got != want {
			t.Errorf("hasCap(%d) = %v, capget says %v", bit, got, want)
		}
	}
}

func effectiveCaps(t *testing.T) uint64 {
	t.Helper()
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		t.Fatal(err)
	}
	return uint64(data[0].Effective) | uint64(data[1].Effective)<<32
}

# Probe (issue 28): can code reach only the processes that use verbs, with
# no LD_PRELOAD, as a provider entry in a trimmed libibverbs.d? Run it in
# the VM (it builds its library in the guest):
#   SWIFT_VM_KEEP=1 SWIFT_VM_SCENARIOS=probe \
#   SWIFT_VM_PROBE=$PWD/test/vm/probes/verbs-provider-entry.sh \
#   go test -count=1 -tags e2e -v -run TestVM ./test/vm
# and read the PROBE lines of probe.log in the kept run directory.
set +e
P() { echo "PROBE: $*"; }
here=$(dirname "$SWIFTVM_PROBE")
W=/run/probe-provider
mkdir -p "$W/d" "$W/trim"
gcc -Wall -Wextra -Werror -O2 -shared -fPIC -o "$W/libswiftprobe-rdmav34.so" "$here/verbs-provider-entry.c" || P "build failed"
printf 'driver rxe\n' >"$W/trim/rxe.driver"
printf 'driver rxe\n' >"$W/d/rxe.driver"
# a driver named by a path: libibverbs appends -rdmav34.so
printf 'driver %s/libswiftprobe\n' "$W" >"$W/d/swiftprobe.driver"
P "kernel $(uname -r), devices $(ls /sys/class/infiniband | tr '\n' ' ')"
run() { # the command with the probe's libibverbs.d bound over /etc/libibverbs.d
	unshare -m sh -c "mount --bind $W/d /etc/libibverbs.d && $1" >"$W/out" 2>&1
	echo "rc=$? $(tr '\n' ' ' <"$W/out" | cut -c1-120)"
}
for cmd in true "ls /dev/infiniband" ibv_devices "ibv_devinfo -d rxe0"; do
	rm -f "$W"/loaded.*
	P "$cmd: $(run "$cmd") loaded in $(ls "$W" | grep -c '^loaded\.') process(es): $(cat "$W"/loaded.* 2>/dev/null | tr '\n' ' ')"
done
# what the extra entry costs a verbs user: ibv_devices, 20 runs each
t() {
	s=$(date +%s%N)
	for i in $(seq 20); do unshare -m sh -c "mount --bind $1 /etc/libibverbs.d && ibv_devices >/dev/null"; done
	echo $((($(date +%s%N) - s) / 20000))
}
P "ibv_devices, mean us of 20 (with unshare and mount): stock $(t /etc/libibverbs.d) trimmed $(t "$W/trim") trimmed+probe $(t "$W/d")"

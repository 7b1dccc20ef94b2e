# shellcheck shell=sh
# The gateway scenario (sourced by scenarios.sh): functions invoked the way
# serverless platforms invoke them, through swift-gateway in a zygote
# container, by $R/gwload on the node as an invoker would.
#
# Container ga runs seven gateways on the node's loopback (ga shares the
# node's network: a pod with a network of its own would listen on its own
# address): OpenWhisk mode on 18480 (its handler chosen by /init), the
# error handlers on 18481-18483 (exit 3, crash, sleep past the deadline),
# plain HTTP on 18484, the warm baseline on 18485, and sleepers on 18486. Container gb's echo
# function serves every QP of its pool with ga.

scenario_gateway() {
	need_rxe
	need_containerd
	P=10.0.2.15
	n=${SWIFTVM_GATEWAY_RUNS:-1000}
	b=${SWIFTVM_BENCH_RUNS:-30}
	rs=${SWIFTVM_GATEWAY_RATE_SECS:-3}
	L="$R/gwload"
	U=http://127.0.0.1
	cat >"$W/gateway-entry.sh" <<'EOS'
G=/.swift/bin/swift-gateway
# on the node's network (ctr --net-host): the node's addresses are refused
$G --listen :18489 -- noop >/tmp/node-listen.log 2>&1
echo "rc=$?" >>/tmp/node-listen.log
$G --listen 127.0.0.1:18480 --peer gb --concurrency 16 --queue 128 --timeout 20s &
$G --listen 127.0.0.1:18481 --peer gb -- exit 3 &
$G --listen 127.0.0.1:18482 --peer gb -- crash &
$G --listen 127.0.0.1:18483 --peer gb --concurrency 1 -- sleep 5000 &
$G --mode http --listen 127.0.0.1:18484 --peer gb --concurrency 16 --queue 128 -- roundtrip &
$G --listen 127.0.0.1:18485 --peer gb --warm -- roundtrip serve &
$G --listen 127.0.0.1:18486 --no-qp --concurrency 100 --queue 100 -- sleep 8000 &
wait
EOS
	# pool 64: 16 functions at once, the warm one and the rows the zygote
	# is taking back never need a QP connected on demand, which gb's echo
	# (holding the rows it had when it started) would not serve
	step "start containers gb (an echo's zygote) and ga (zygote, seven gateways as its workload), pool 64"
	bounded 120 - zrun gb gb 18546 t1 "ga=$P:18545" 64
	ZRUN_ENTRY="$W/gateway-entry.sh" bounded 120 - zrun ga ga 18545 t1 "gb=$P:18546" 64
	step "ga's zygote connects its pool to gb"
	zwait ga gb connected || fail "ga never connected to gb"
	step "gb's echo function serves every QP of its pool with ga"
	zexec_t 900 gb /.swift/bin/swift-run --peer ga --all -- echo 120000 >"$W/gateway-echo.log" 2>&1 &
	epid=$!
	echo_ready gb ga || fail "gb's echo holds no QP"
	i=0
	until "$L" one "$U:18480/nothing" x 2>/dev/null | grep -q '^code 404'; do
		i=$((i + 1))
		[ $i -lt 60 ] || fail "the gateway on 18480 never answered"
		sleep 0.5
	done

	fact node_listen "$(tr '\n' ' ' <"$W/rootfs-ga/tmp/node-listen.log")"
	step "OpenWhisk: /init picks the roundtrip handler; a second /init is refused"
	out=$("$L" init "$U:18480" '{"value":{"name":"rt","main":"roundtrip","code":"","binary":false,"env":{"GREETING":"hi"}}}')
	echo "$out"
	fact init "$(echo "$out" | sed -n 's/^code //p') $(echo "$out" | sed -n 's/^body //p')"
	out=$("$L" init "$U:18480" '{"value":{"main":"roundtrip"}}')
	fact init_again "$(echo "$out" | sed -n 's/^code //p') $(echo "$out" | sed -n 's/^body //p')"

	step "OpenWhisk: $n /run calls with distinct values from 8 clients at once, each answered over a pool QP"
	out=$(bounded 600 - "$L" ow "$U:18480" "$n" gb 8)
	echo "$out"
	for k in ok bad first_bad qpns median_us p99_us fork_us; do
		fact "ow.$k" "$(echo "$out" | sed -n "s/^$k //p")"
	done
	usual=$(echo "$out" | sed -n 's/^p99_us //p')

	# next_run KEY: one /run on 18480 right after an error case; its time
	next_run() {
		o=$("$L" one "$U:18480/run" '{"value":{"after":"'"$1"'"}}')
		fact "$1.next" "$(echo "$o" | sed -n 's/^code //p') $(echo "$o" | grep -c '"after":"'"$1"'"')"
		fact "$1.next_ms" "$(echo "$o" | sed -n 's/^ms //p')"
	}
	# errcase KEY PORT BODY: the gateway's answer
	errcase() {
		o=$("$L" one "$U:$2/run" "$3")
		echo "$1: $o"
		fact "$1" "$(echo "$o" | sed -n 's/^code //p') $(echo "$o" | sed -n 's/^body //p')"
	}
	step "errors: a function that exits 3, a crash, one past the deadline, an oversized body, malformed JSON"
	errcase exit 18481 '{"value":{}}'
	next_run exit
	errcase crash 18482 '{"value":{}}'
	next_run crash
	errcase deadline 18483 @deadline:1500
	next_run deadline
	# the function past its deadline is gone (the zygote ended it): its QP
	# is back in the pool
	sleep 1.5
	fact deadline.assigned "$(zexec ga /.swift/bin/swift-run --status | sed -n 's/^peer gb .* assigned \([0-9]*\)$/\1/p')"
	errcase oversized 18480 @big:1100000
	next_run oversized
	errcase malformed 18480 '{"value":{"a":1'
	next_run malformed
	errcase not_object 18480 '{"value":[1,2]}'
	step "over the concurrency: two at once where one may run"
	out=$("$L" burst "$U:18483/run" 2 @deadline:3000)
	fact burst "$(echo "$out" | sed -n 's/^codes //p')"

	step "a slowloris: 64 clients that never finish their header; /run meanwhile"
	"$L" slowloris "$U:18480" 64 30 >"$W/slowloris.out" 2>&1 &
	spid=$!
	sleep 1
	next_run slowloris
	wait $spid
	cat "$W/slowloris.out"
	for k in closed replied closed_after_ms; do
		fact "slowloris.$k" "$(sed -n "s/^$k //p" "$W/slowloris.out")"
	done

	step "plain HTTP (Knative): $n calls with distinct bodies from 8 clients at once"
	out=$(bounded 600 - "$L" http "$U:18484/fn" "$n" gb 8)
	echo "$out"
	for k in ok bad first_bad qpns median_us p99_us; do
		fact "http.$k" "$(echo "$out" | sed -n "s/^$k //p")"
	done
	out=$("$L" one "$U:18484/.swift/healthz" x)
	fact http.healthz "$(echo "$out" | sed -n 's/^code //p')"

	step "bench, side by side: HTTP /run, swift-run in the container, ctr task exec, warm ($b runs each)"
	body='{"value":{"i":1,"pad":"0123456789abcdef"},"activation_id":"bench"}'
	printf '%s' "$body" >"$W/rootfs-ga/tmp/in.json"
	k=1
	while [ $k -le 3 ]; do
		o=$("$L" ow "$U:18480" "$b" gb)
		echo "$o" | sed "s/^/http.$k /"
		o=$("$L" ow "$U:18485" "$b" gb)
		echo "$o" | sed "s/^/warm.$k /"
		o=$(zexec_t 300 ga /usr/bin/gwload run "$b" /tmp/in.json -- /.swift/bin/swift-run --peer gb -- roundtrip)
		echo "$o" | sed "s/^/inpod.$k /"
		o=$("$L" run "$(( (b + 2) / 3 ))" "$W/rootfs-ga/tmp/in.json" -- \
			ctr --address "$W/containerd.sock" -n "$NS" task exec --exec-id "bench$k-{n}" ga /.swift/bin/swift-run --peer gb -- roundtrip)
		echo "$o" | sed "s/^/exec.$k /"
		k=$((k + 1))
	done >"$W/gateway-bench.out" 2>&1
	cat "$W/gateway-bench.out"
	for m in http warm inpod exec; do
		fact "bench.$m.ok" "$(sed -n "s/^$m\.[0-9] ok //p" "$W/gateway-bench.out" | awk '{s += $1} END {print s + 0}')"
		fact "bench.$m.bad" "$(sed -n "s/^$m\.[0-9] bad //p" "$W/gateway-bench.out" | awk '{s += $1} END {print s + 0}')"
		fact "bench.$m.median_us" "$(sed -n "s/^$m\.[0-9] median_us //p" "$W/gateway-bench.out" | median)"
		fact "bench.$m.p99_us" "$(sed -n "s/^$m\.[0-9] p99_us //p" "$W/gateway-bench.out" | sort -n | tail -1)"
	done
	fact bench.runs "$b"
	step "rate under vegeta at 1, 4, 16 and 64 clients ($rs s each; 16 functions at once, 128 may wait)"
	for c in 1 4 16 64; do
		o=$("$L" rate "$U:18480/run" "$c" "$rs" "$body")
		echo "rate c=$c: $(echo "$o" | tr '\n' ' ')"
		for k in rate p99_us success codes; do
			fact "rate.c$c.$k" "$(echo "$o" | sed -n "s/^$k //p")"
		done
	done

	step "fork start against the functions already running: 0, 16, 64 (each sleeping 8 s)"
	for m in 0 16 64; do
		if [ $m -gt 0 ]; then
			"$L" burst "$U:18486/run" $m '{"value":{}}' >"$W/sleepers.out" 2>&1 &
			bpid=$!
			sleep 2
		fi
		o=$("$L" ow "$U:18480" "$b" gb)
		echo "running $m: $(echo "$o" | tr '\n' ' ')"
		fact "running.$m.ok" "$(echo "$o" | sed -n 's/^ok //p')"
		fact "running.$m.fork_us" "$(echo "$o" | sed -n 's/^fork_us //p')"
		fact "running.$m.median_us" "$(echo "$o" | sed -n 's/^median_us //p')"
		[ $m -gt 0 ] && wait $bpid
	done

	step "the zygote's pool build time and RSS against pool size: 1, 16, 64, 256"
	for q in 1 16 64 256; do
		bounded 120 - zrun pb pb 18548 t1 "pa=$P:18547" "$q"
		t0=$(date +%s%N)
		bounded 120 - zrun pa pa 18547 t1 "pb=$P:18548" "$q"
		pid=$(ctr_ task ls | awk '$1 == "pa" {print $2}')
		st="/proc/$pid/root/run/swift/pool.status"
		i=0
		until grep -q "^peer pb .* connected free $q " "$st" 2>/dev/null; do
			i=$((i + 1))
			[ $i -lt 3600 ] || break
			sleep 0.05
		done
		ms=$(( ($(date +%s%N) - t0) / 1000000 ))
		rows=$(sed -n 's/^rows total=\([0-9]*\) .*/\1/p' "$st")
		rss=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$pid/status")
		if [ $i -ge 3600 ]; then
			echo "pool $q: not connected within 180 s; $rows rows built; swift-init RSS $rss kB"
			head -3 "$st"
			zexec pb /.swift/bin/swift-run --status 2>&1 | head -3 || true
			echo "--- pa.out (tail)"; tail -n 15 "$W/pa.out"
			echo "--- pb.out (tail)"; tail -n 15 "$W/pb.out"
			fact "pool.$q.connected" no
		else
			echo "pool $q: built and connected in $ms ms from ctr run; swift-init RSS $rss kB"
			fact "pool.$q.connected" yes
			fact "pool.$q.ms" "$ms"
		fi
		fact "pool.$q.rows" "$rows"
		fact "pool.$q.rss_kb" "$rss"
		bounded 60 - zstop pa pb
	done

	step "gb's echo: every message intact"
	kill "$epid" 2>/dev/null
	wait "$epid" 2>/dev/null
	zexec ga /.swift/bin/swift-run --status
	echo "--- ga.out (tail)"; tail -n 40 "$W/ga.out"
	step "stop ga and gb"
	bounded 60 - zstop ga gb
}

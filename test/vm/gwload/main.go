// Command gwload drives swift-gateway from a VM guest as a platform would
// and prints what it saw as "key value" lines for the scenario's facts:
//
//	gwload init URL JSON              POST URL/init; code and body
//	gwload ow URL N PEER [WORKERS]    N /run calls with distinct values, each checked,
//	                                  from WORKERS clients at once (default 1)
//	gwload http URL N PEER [WORKERS]  the same in plain HTTP, with distinct bodies
//	gwload one URL BODY               POST URL once, after a first request that
//	                                  opens the connection (BODY: a literal,
//	                                  @big:N, @deadline:MS or @file:PATH)
//	gwload burst URL K BODY           K requests at once; a count per status code
//	gwload slowloris URL K SECS       K clients that never finish their header
//	gwload rate URL CONC SECS BODY    vegeta at CONC workers for SECS seconds
//	gwload run N STDIN -- CMD ARGS    CMD N times, STDIN its input, each timed
//	                                  whole ({n} in ARGS: the run's number)
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: gwload init|ow|http|one|burst|slowloris|rate URL ...")
		os.Exit(2)
	}
	var err error
	a := os.Args[2:]
	switch os.Args[1] {
	case "init":
		err = one(a[0]+"/init", a[1])
	case "ow", "http":
		workers := 1
		if len(a) > 3 {
			workers = atoi(a[3])
		}
		err = calls(os.Args[1], a[0], atoi(a[1]), a[2], workers)
	case "one":
		err = one(a[0], a[1])
	case "burst":
		err = burst(a[0], atoi(a[1]), body(a[2]))
	case "slowloris":
		err = slowloris(a[0], atoi(a[1]), atoi(a[2]))
	case "rate":
		err = rate(a[0], atoi(a[1]), atoi(a[2]), body(a[3]))
	case "run":
		if len(a) < 4 || a[2] != "--" {
			err = fmt.Errorf("usage: gwload run N STDIN -- CMD ARGS")
			break
		}
		err = runs(atoi(a[0]), a[1], a[3:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	return n
}

// body: a literal, @big:N (an activation of N bytes of padding),
// @deadline:MS (an activation whose deadline is MS from now, when it is
// sent), or @file:PATH.
func body(s string) []byte {
	if ms, ok := strings.CutPrefix(s, "@deadline:"); ok {
		return []byte(fmt.Sprintf(`{"value":{},"deadline":"%d"}`, time.Now().Add(time.Duration(atoi(ms))*time.Millisecond).UnixMilli()))
	}
	if n, ok := strings.CutPrefix(s, "@big:"); ok {
		return []byte(`{"value":{"pad":"` + strings.Repeat("a", atoi(n)) + `"}}`)
	}
	if p, ok := strings.CutPrefix(s, "@file:"); ok {
		b, err := os.ReadFile(p)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		return b
	}
	return []byte(s)
}

var client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 128}}

func post(u string, b []byte) (int, []byte, http.Header, time.Duration, error) {
	t0 := time.Now()
	resp, err := client.Post(u, "application/json", bytes.NewReader(b)) //nolint:gosec // the scenario's own gateway is the target

	if err != nil {
		return 0, nil, nil, time.Since(t0), err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header, time.Since(t0), err
}

func one(u, spec string) error {
	// the connection first, so that the time is the request's alone
	if resp, err := client.Get(u); err == nil { //nolint:gosec // the scenario's own gateway is the target
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	code, out, _, d, err := post(u, body(spec))
	if err != nil {
		return err
	}
	fmt.Println("code", code)
	fmt.Println("body", strings.TrimSpace(string(out)))
	fmt.Println("ms", d.Milliseconds())
	return nil
}

func median(d []time.Duration, q float64) int64 {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*q)].Microseconds()
}

// roundtrip is what the roundtrip handler prints.
type roundtrip struct {
	Echo     json.RawMessage `json:"echo"`
	Peer     string          `json:"peer"`
	QPN      uint32          `json:"qpn"`
	Messages int             `json:"messages"`
}

// calls makes n calls with distinct values, from workers clients at
// once, and checks that each result carries its own value back from the
// peer, over a pool QP.
func calls(mode, base string, n int, peer string, workers int) error {
	var mu sync.Mutex
	var lat, forks []time.Duration
	ok, bad := 0, 0
	first := ""
	qpns := map[uint32]bool{}
	next := make(chan int)
	go func() {
		for i := range n {
			next <- i
		}
		close(next)
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				d, fork, qpn, why := call(mode, base, i, peer)
				mu.Lock()
				if why != "" {
					bad++
					if first == "" {
						first = fmt.Sprintf("call %d: %s", i, why)
					}
				} else {
					ok++
					qpns[qpn] = true
					lat = append(lat, d)
					if fork > 0 {
						forks = append(forks, fork)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Println("ok", ok)
	fmt.Println("bad", bad)
	fmt.Println("first_bad", first)
	fmt.Println("qpns", len(qpns))
	fmt.Println("median_us", median(lat, 0.5))
	fmt.Println("p99_us", median(lat, 0.99))
	fmt.Println("fork_us", median(forks, 0.5))
	return nil
}

// call makes call i: its time, the zygote's fork time, the QP it used, or
// why it is not right.
func call(mode, base string, i int, peer string) (time.Duration, time.Duration, uint32, string) {
	nonce := make([]byte, 8)
	rand.Read(nonce)
	value := fmt.Sprintf(`{"i":%d,"nonce":"%s"}`, i, hex.EncodeToString(nonce))
	u, b := base, []byte(value)
	if mode == "ow" {
		u = base + "/run"
		b = []byte(fmt.Sprintf(`{"value":%s,"activation_id":"act-%d","action_name":"/guest/rt","namespace":"guest","deadline":"%d"}`,
			value, i, time.Now().Add(60*time.Second).UnixMilli()))
	}
	code, out, h, d, err := post(u, b)
	var rt roundtrip
	switch {
	case err != nil:
		return 0, 0, 0, err.Error()
	case code != 200:
		return 0, 0, 0, fmt.Sprintf("status %d: %s", code, bytes.TrimSpace(out))
	case json.Unmarshal(out, &rt) != nil:
		return 0, 0, 0, "not JSON: " + string(out)
	case rt.Peer != peer || rt.QPN == 0 || rt.Messages < 1:
		return 0, 0, 0, "not over a QP to " + peer + ": " + string(out)
	}
	// what came back over the QP: the value sent, and in OpenWhisk mode
	// the activation around it
	got := rt.Echo
	if mode == "ow" {
		var act struct {
			Value        json.RawMessage `json:"value"`
			ActivationID string          `json:"activation_id"`
		}
		if json.Unmarshal(rt.Echo, &act) != nil || act.ActivationID != fmt.Sprintf("act-%d", i) {
			return 0, 0, 0, "activation not echoed: " + string(rt.Echo)
		}
		got = act.Value
	}
	if !bytes.Equal(got, []byte(value)) {
		return 0, 0, 0, fmt.Sprintf("value %s came back as %s", value, got)
	}
	var fork time.Duration
	if us, err := strconv.Atoi(h.Get("Swift-Fork-Us")); err == nil {
		fork = time.Duration(us) * time.Microsecond
	}
	return d, fork, rt.QPN, ""
}

// burst sends k requests at once and counts the answers by status.
func burst(u string, k int, b []byte) error {
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, _, _, err := post(u, b)
			if err != nil {
				code = -1
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	var keys []int
	for c := range codes {
		keys = append(keys, c)
	}
	sort.Ints(keys)
	var parts []string
	for _, c := range keys {
		parts = append(parts, fmt.Sprintf("%d:%d", c, codes[c]))
	}
	fmt.Println("codes", strings.Join(parts, " "))
	return nil
}

// slowloris opens k connections that send a request line and then one
// header line a second, never the blank line. It reports how many the
// server closed, whether any got a byte back, and when.
func slowloris(base string, k, secs int) error {
	pu, err := url.Parse(base)
	if err != nil {
		return err
	}
	type end struct {
		after   time.Duration
		replied bool
	}
	ends := make(chan end, k)
	t0 := time.Now()
	for range k {
		go func() {
			c, err := net.Dial("tcp", pu.Host) //nolint:gosec // the scenario's own gateway is the target
			if err != nil {
				ends <- end{-1, false}
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "POST /run HTTP/1.1\r\nHost: %s\r\n", pu.Host)
			got := make(chan bool, 1)
			go func() {
				b := make([]byte, 1)
				n, _ := c.Read(b)
				got <- n > 0
			}()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case r := <-got:
					ends <- end{time.Since(t0), r}
					return
				case <-tick.C:
					if time.Since(t0) > time.Duration(secs)*time.Second {
						ends <- end{-1, false}
						return
					}
					fmt.Fprintf(c, "X-Slow: %d\r\n", time.Now().Unix())
				}
			}
		}()
	}
	closed, replied := 0, 0
	var after []time.Duration
	for range k {
		e := <-ends
		if e.after >= 0 {
			closed++
			after = append(after, e.after)
		}
		if e.replied {
			replied++
		}
	}
	fmt.Println("closed", closed)
	fmt.Println("replied", replied)
	fmt.Println("closed_after_ms", median(after, 1)/1000)
	return nil
}

// rate runs vegeta with conc workers, each sending its next request when
// its last is answered, for secs seconds.
func rate(u string, conc, secs int, b []byte) error {
	tg := vegeta.NewStaticTargeter(vegeta.Target{Method: "POST", URL: u, Body: b,
		Header: http.Header{"Content-Type": []string{"application/json"}}})
	at := vegeta.NewAttacker(vegeta.Workers(uint64(conc)), vegeta.MaxWorkers(uint64(conc)), vegeta.KeepAlive(true),
		vegeta.Connections(conc), vegeta.Timeout(60*time.Second))
	var m vegeta.Metrics
	for res := range at.Attack(tg, vegeta.Rate{Freq: 0}, time.Duration(secs)*time.Second, "gwload") {
		m.Add(res)
	}
	m.Close()
	fmt.Println("requests", m.Requests)
	fmt.Printf("rate %.1f\n", m.Throughput)
	fmt.Printf("success %.4f\n", m.Success)
	fmt.Println("p50_us", m.Latencies.P50.Microseconds())
	fmt.Println("p99_us", m.Latencies.P99.Microseconds())
	codes := []string{}
	for c, n := range m.StatusCodes {
		codes = append(codes, fmt.Sprintf("%s:%d", c, n))
	}
	sort.Strings(codes)
	fmt.Println("codes", strings.Join(codes, " "))
	return nil
}

// runs runs a command n times with stdin from a file, timing each run
// whole (its exec too), as a caller that spawns it sees it; a run must
// exit 0 and print a roundtrip's JSON.
func runs(n int, stdin string, argv []string) error {
	in, err := os.ReadFile(stdin)
	if err != nil {
		return err
	}
	var lat []time.Duration
	ok, bad := 0, 0
	first := ""
	for i := range n {
		args := make([]string, len(argv))
		for j, a := range argv {
			args[j] = strings.ReplaceAll(a, "{n}", strconv.Itoa(i))
		}
		c := exec.Command(args[0], args[1:]...)
		c.Stdin = bytes.NewReader(in)
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		t0 := time.Now()
		err := c.Run()
		d := time.Since(t0)
		if err == nil && !bytes.Contains(out.Bytes(), []byte(`"echo":`)) {
			err = fmt.Errorf("no roundtrip in its output: %q", out.String())
		}
		if err != nil {
			bad++
			if first == "" {
				first = fmt.Sprintf("run %d: %v: %s", i, err, strings.TrimSpace(errb.String()))
			}
			continue
		}
		ok++
		lat = append(lat, d)
	}
	fmt.Println("ok", ok)
	fmt.Println("bad", bad)
	fmt.Println("first_bad", first)
	fmt.Println("median_us", median(lat, 0.5))
	fmt.Println("p99_us", median(lat, 0.99))
	return nil
}

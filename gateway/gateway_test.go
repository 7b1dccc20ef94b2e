package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/errdefs"

	"github.com/swift-rdma/swift-containerd/swiftrun"
)

// syncBuf is a log the gateway writes from several goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type bed struct {
	z              *fakeZygote
	g              *Gateway
	url            string
	stdout, stderr *syncBuf
}

func newBed(t *testing.T, cfg Config) *bed {
	t.Helper()
	b := &bed{z: startFakeZygote(t), stdout: &syncBuf{}, stderr: &syncBuf{}}
	cfg.Zygote = &swiftrun.Client{Socket: b.z.sock}
	cfg.Stdout, cfg.Stderr = b.stdout, b.stderr
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.g = g
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := g.Server(ln.Addr().String())
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	b.url = "http://" + ln.Addr().String()
	return b
}

func (b *bed) post(t *testing.T, path, body string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.url+path, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(out)), resp.Header
}

func TestOpenWhisk(t *testing.T) {
	b := newBed(t, Config{Mode: ModeOpenWhisk, Peer: "b", Concurrency: 2})
	if code, body, _ := b.post(t, "/run", `{"value":{}}`); code != 500 || body != `{"error":"no action defined yet: POST /init first"}` {
		t.Errorf("/run before /init: %d %s", code, body)
	}
	if code, body, _ := b.post(t, "/init", `{"value":{"name":"a","main":"cat","code":"","binary":false,"env":{"GREETING":"hi"}}}`); code != 200 || body != `{"ok":true}` {
		t.Fatalf("/init: %d %s", code, body)
	}
	if code, body, _ := b.post(t, "/init", `{"value":{"main":"cat"}}`); code != 403 || body != `{"error":"Cannot initialize the action more than once."}` {
		t.Errorf("second /init: %d %s", code, body)
	}
	// the function gets the activation on stdin; cat prints it back
	code, body, h := b.post(t, "/run", `{"value":{"a":[1,2]},"activation_id":"x1","action_name":"/ns/a","deadline":"4102444800000","api_key":"k"}`)
	want := `{"value":{"a":[1,2]},"action_name":"/ns/a","activation_id":"x1","api_key":"k","deadline":4102444800000,"env":{"GREETING":"hi"}}`
	if code != 200 || body != want {
		t.Errorf("/run: %d %s\nwant 200 %s", code, body, want)
	}
	if h.Get("Swift-Fork-Us") != "150" || h.Get("Swift-Function-Us") == "" {
		t.Errorf("/run: Swift-Fork-Us %q Swift-Function-Us %q, want the zygote's 150 and a time", h.Get("Swift-Fork-Us"), h.Get("Swift-Function-Us"))
	}
	reqs := b.z.requests()
	if len(reqs) != 1 || reqs[0].peer != "b" || reqs[0].flags != 0 || strings.Join(reqs[0].args, " ") != "cat" {
		t.Errorf("the zygote got %+v, want one request for cat with peer b", reqs)
	}
	// each activation's log ends with the markers, on stdout and stderr:
	// the one refused before /init and the one that ran
	for _, l := range []*syncBuf{b.stdout, b.stderr} {
		if got := strings.Count(l.String(), ActivationMarker+"\n"); got != 2 {
			t.Errorf("%d markers in %q, want 2", got, l.String())
		}
	}
}

// TestOpenWhiskErrors: each way a request or function fails, its reply.
func TestOpenWhiskErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler []string
		path    string
		body    string
		code    int
		reply   string
	}{
		{"exit status", []string{"exit", "3"}, "/run", `{"value":{}}`, 502, `{"error":"the function exited with status 3"}`},
		{"crash", []string{"crash"}, "/run", `{"value":{}}`, 502, `{"error":"the function was killed by signal 11 (segmentation fault)"}`},
		{"past the deadline", []string{"sleep", "5000"}, "/run",
			fmt.Sprintf(`{"value":{},"deadline":%d}`, time.Now().Add(300*time.Millisecond).UnixMilli()),
			502, `{"error":"the function did not end by the activation's deadline: it was ended"}`},
		{"deadline passed", []string{"cat"}, "/run", `{"value":{},"deadline":"1000"}`, 502, `{"error":"the activation's deadline has passed"}`},
		{"not a dictionary", []string{"say", "[1]"}, "/run", `{"value":{}}`, 502, `{"error":"The action did not return a dictionary."}`},
		{"not JSON", []string{"say", "{oops"}, "/run", `{"value":{}}`, 502, `{"error":"The action did not return a dictionary."}`},
		{"result too big", []string{"big", "2000"}, "/run", `{"value":{}}`, 502, `{"error":"the function's result exceeds the gateway's bound of 1000 bytes: it was ended"}`},
		{"body too big", []string{"cat"}, "/run", `{"value":{"p":"` + strings.Repeat("a", 1000) + `"}}`, 413, `{"error":"request body of 1018 bytes exceeds the gateway's bound of 1000 bytes"}`},
		{"malformed JSON", []string{"cat"}, "/run", `{"value":{"a":1`, 400, `{"error":"/run: malformed JSON: unexpected EOF"}`},
		{"two values", []string{"cat"}, "/run", `{"value":{}} {}`, 400, `{"error":"/run: malformed JSON: more than one value"}`},
		{"value not an object", []string{"cat"}, "/run", `{"value":"s"}`, 400, `{"error":"/run: \"value\" must be a JSON object"}`},
		{"no value", []string{"cat"}, "/run", `{"activation_id":"x"}`, 400, `{"error":"/run: \"value\" must be a JSON object"}`},
		{"bad field type", []string{"cat"}, "/run", `{"value":{},"activation_id":7}`, 400,
			`{"error":"/run: malformed JSON: json: cannot unmarshal number into Go struct field runBody.activation_id of type string"}`},
		{"bad deadline", []string{"cat"}, "/run", `{"value":{},"deadline":"soon"}`, 400, `{"error":"/run: \"deadline\" \"soon\": want milliseconds since the epoch"}`},
		{"unknown handler", []string{"nosuch"}, "/run", `{"value":{}}`, 502, `{"error":"the function exited with status 127"}`},
		{"unknown path", []string{"cat"}, "/other", `{}`, 404, `{"error":"no such path \"/other\": an OpenWhisk action serves POST /init and POST /run"}`},
		{"code sent to /init", []string{"cat"}, "/init", `{"value":{"main":"cat","code":"print(1)"}}`, 400,
			`{"error":"/init: \"code\" given: this action runs a handler of its image (a built-in or a shared object), never code sent to it"}`},
		{"another handler at /init", []string{"cat"}, "/init", `{"value":{"main":"crash"}}`, 403, `{"error":"/init: main \"crash\": this action container runs handler cat only"}`},
		{"bad env", []string{"cat"}, "/init", `{"value":{"env":{"1A":"x"}}}`, 400, `{"error":"/init: \"env\" name \"1A\": letters, digits and _, not first a digit"}`},
		{"env not strings", []string{"cat"}, "/init", `{"value":{"env":{"A":1}}}`, 400,
			`{"error":"/init: \"env\" must be an object of strings: json: cannot unmarshal number into Go value of type string"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBed(t, Config{Mode: ModeOpenWhisk, Handler: tc.handler, MaxBody: 1000, MaxResult: 1000})
			code, body, _ := b.post(t, tc.path, tc.body)
			if code != tc.code || body != tc.reply {
				t.Errorf("got %d %s\nwant %d %s", code, body, tc.code, tc.reply)
			}
			// the gateway serves on: the next request is answered
			if tc.path == "/run" {
				b.g.cfg.Handler = []string{"say", `{"next":1}`}
				b.g.handler = b.g.cfg.Handler
				if code, body, _ := b.post(t, "/run", `{"value":{}}`); code != 200 || body != `{"next":1}` {
					t.Errorf("the next /run: %d %s", code, body)
				}
			}
		})
	}
	// the function past its deadline was ended: its caller went away
	b := newBed(t, Config{Mode: ModeOpenWhisk, Handler: []string{"sleep", "5000"}, Timeout: 200 * time.Millisecond})
	if code, _, _ := b.post(t, "/run", `{"value":{}}`); code != 502 {
		t.Errorf("past the gateway's own timeout: %d, want 502", code)
	}
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b.z.mu.Lock()
		ended := b.z.ended
		b.z.mu.Unlock()
		if ended == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d functions ended by their caller, want 1", ended)
		}
	}
}

func TestZygoteRefusal(t *testing.T) {
	b := newBed(t, Config{Mode: ModeOpenWhisk, Handler: []string{"cat"}, Peer: "nobody"})
	code, body, _ := b.post(t, "/run", `{"value":{}}`)
	if code != 502 || body != `{"error":"the zygote refused: no peer nobody (no such file or directory)"}` {
		t.Errorf("got %d %s", code, body)
	}
	// no zygote at all
	g, err := New(Config{Mode: ModeOpenWhisk, Handler: []string{"cat"}, Zygote: &swiftrun.Client{Socket: "/nonexistent/zygote.sock"},
		Stdout: io.Discard, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/run", strings.NewReader(`{"value":{}}`)))
	// the socket's path is the gateway's log's business, not the client's
	if w.Code != 503 || strings.TrimSpace(w.Body.String()) != `{"error":"the zygote does not answer"}` {
		t.Errorf("no zygote: %d %s", w.Code, w.Body.String())
	}
}

func TestMethod(t *testing.T) {
	b := newBed(t, Config{Mode: ModeOpenWhisk, Handler: []string{"cat"}})
	resp, err := http.Get(b.url + "/run")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" || strings.TrimSpace(string(out)) != `{"error":"GET /run: want POST"}` {
		t.Errorf("GET /run: %d %q %s", resp.StatusCode, resp.Header.Get("Allow"), out)
	}
}

// TestConcurrency: beyond the functions that may run and the requests that
// may wait, 429 at once; a waiting request runs when a slot frees.
func TestConcurrency(t *testing.T) {
	b := newBed(t, Config{Mode: ModeOpenWhisk, Handler: []string{"sleep", "400"}, Concurrency: 1, Queue: 1})
	codes := make(chan int, 3)
	for range 3 {
		go func() {
			code, _, _ := b.post(t, "/run", `{"value":{}}`)
			codes <- code
		}()
		time.Sleep(50 * time.Millisecond)
	}
	got := map[int]int{}
	for range 3 {
		got[<-codes]++
	}
	// sleep prints nothing: not a dictionary, but it ran
	if got[502] != 2 || got[429] != 1 {
		t.Errorf("codes %v, want two that ran (502: no dictionary) and one 429", got)
	}
	if n := len(b.z.requests()); n != 2 {
		t.Errorf("%d functions forked, want 2", n)
	}
}

// TestSlowClients: a client that never finishes its header is cut off
// without a reply; one that sends its body too slowly gets 408.
func TestSlowClients(t *testing.T) {
	b := newBed(t, Config{Mode: ModeOpenWhisk, Handler: []string{"cat"}, HeaderTimeout: 300 * time.Millisecond, BodyTimeout: 300 * time.Millisecond})
	host := strings.TrimPrefix(b.url, "http://")
	c, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /run HTTP/1.1\r\nHost: x\r\n")
	t0 := time.Now()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 1))
	if n != 0 || err == nil || time.Since(t0) > 3*time.Second {
		t.Errorf("slowloris: read %d bytes, %v after %v; want the connection closed, no reply, within the header bound", n, err, time.Since(t0))
	}
	// the body: header at once, then a byte, then silence
	c2, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	fmt.Fprintf(c2, "POST /run HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil {
		t.Fatalf("slow body: %v", err)
	}
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 408 || !strings.Contains(string(out), "the request body did not arrive within 600ms") {
		t.Errorf("slow body: %d %s", resp.StatusCode, out)
	}
	if n := len(b.z.requests()); n != 0 {
		t.Errorf("%d functions forked for slow clients, want none", n)
	}
}

func TestHTTPMode(t *testing.T) {
	b := newBed(t, Config{Mode: ModeHTTP, Handler: []string{"cat"}, Peer: "b", Peers: []string{"c"}, Concurrency: 4, MaxBody: 100})
	code, body, h := b.post(t, "/any/path", "hello, function")
	if code != 200 || body != "hello, function" || h.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("got %d %q %q", code, body, h.Get("Content-Type"))
	}
	if code, body, _ = b.post(t, "/", "x", PeerHeader, "c"); code != 200 || body != "x" {
		t.Errorf("with %s: %d %q", PeerHeader, code, body)
	}
	for _, p := range []string{"d", strings.Repeat("p", 128), "b c"} {
		if code, body, _ = b.post(t, "/", "x", PeerHeader, p); code != 400 || !strings.Contains(body, "is not among the peers this gateway lets a request choose (--peers)") {
			t.Errorf("%s %q: %d %q", PeerHeader, p, code, body)
		}
	}
	if code, _, _ = b.post(t, "/", strings.Repeat("y", 101)); code != 413 {
		t.Errorf("101 bytes: %d, want 413", code)
	}
	var peers []string
	for _, r := range b.z.requests() {
		peers = append(peers, r.peer)
	}
	if strings.Join(peers, ",") != "b,c" {
		t.Errorf("peers %v, want b then c", peers)
	}
	resp, err := http.Get(b.url + "/.swift/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		// the fake answers no status request: unhealthy, said as such
		t.Errorf("healthz against a zygote that gives no status: %d, want 503", resp.StatusCode)
	}
	// stderr reaches the log, bounded
	b2 := newBed(t, Config{Mode: ModeHTTP, Handler: []string{"noisy", "300"}, MaxLog: 100})
	if code, body, _ := b2.post(t, "/", ""); code != 200 || body != `{"ok":1}` {
		t.Errorf("noisy: %d %q", code, body)
	}
	if l := b2.stderr.String(); !strings.HasPrefix(l, strings.Repeat("e", 100)+"\nswift-gateway: the function's stderr was cut at 100 bytes (200 more dropped)\n") {
		t.Errorf("log %q", l)
	}
}

// TestWarm: one long-lived function serves every request.
func TestWarm(t *testing.T) {
	b := newBed(t, Config{Mode: ModeOpenWhisk, Handler: []string{"lines"}, Warm: true})
	for i := range 3 {
		code, body, _ := b.post(t, "/run", fmt.Sprintf(`{"value":{"i":%d}}`, i))
		var r struct {
			Line struct {
				Value struct{ I int } `json:"value"`
			} `json:"line"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &r) != nil || r.Line.Value.I != i {
			t.Errorf("run %d: %d %s", i, code, body)
		}
	}
	if n := len(b.z.requests()); n != 1 {
		t.Errorf("%d functions forked, want 1 for every request", n)
	}
}

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"mode", Config{Mode: "grpc"}, `mode "grpc": want "openwhisk" or "http"`},
		{"http without handler", Config{Mode: ModeHTTP}, "mode http needs a handler"},
		{"relative handler", Config{Mode: ModeHTTP, Handler: []string{"lib/h.so"}}, "a built-in's name or the absolute, clean path of a shared object"},
		{"missing shared object", Config{Mode: ModeHTTP, Handler: []string{"/nonexistent/h.so"}}, "handler /nonexistent/h.so"},
		{"concurrency", Config{Mode: ModeOpenWhisk, Concurrency: 129}, "concurrency 129: want 1 to 128"},
		{"queue", Config{Mode: ModeOpenWhisk, Queue: -1}, "queue -1"},
		{"qps", Config{Mode: ModeOpenWhisk, QPs: 300}, "qps 300"},
		{"no-qp and peer", Config{Mode: ModeOpenWhisk, NoQP: true, Peer: "b"}, "no-qp with a peer"},
		{"negative body", Config{Mode: ModeOpenWhisk, MaxBody: -1}, "max body -1"},
		{"negative timeout", Config{Mode: ModeOpenWhisk, Timeout: -time.Second}, "timeout -1s"},
		{"warm at concurrency 2", Config{Mode: ModeOpenWhisk, Warm: true, Concurrency: 2}, "concurrency must be 1"},
		{"NUL in an argument", Config{Mode: ModeHTTP, Handler: []string{"cat", "a\x00"}}, "argument 1 holds a NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
			if tc.name != "missing shared object" && !errdefs.IsInvalidArgument(err) {
				t.Errorf("%v is not InvalidArgument", err)
			}
		})
	}
}

func TestActivation(t *testing.T) {
	for _, tc := range []struct {
		body, want, err string
		deadline        int64
	}{
		{`{"value":{"x":1}}`, `{"value":{"x":1}}`, "", 0},
		{`{"value":{ "x" : 1 },"deadline":"1700000000000","namespace":"n","extra":true}`,
			`{"value":{"x":1},"namespace":"n","deadline":1700000000000,"env":{"E":"v"}}`, "", 1700000000000},
		{`{"value":{"s":"a\nb"},"deadline":1700000000001}`, `{"value":{"s":"a\nb"},"deadline":1700000000001,"env":{"E":"v"}}`, "", 1700000000001},
		// no HTML escaping: what the client sent is what the function reads
		{`{"value":{"h":"<a>&"},"deadline":1700000000002}`, `{"value":{"h":"<a>&"},"deadline":1700000000002,"env":{"E":"v"}}`, "", 1700000000002},
		{`{"value":null}`, "", `"value" must be a JSON object`, 0},
		{`{"value":{},"deadline":-5}`, "", `"deadline" -5: want milliseconds since the epoch`, 0},
		{`{"value":{},"deadline":1.5}`, "", `"deadline" 1.5`, 0},
		{`[]`, "", "malformed JSON", 0},
		{``, "", "malformed JSON: EOF", 0},
	} {
		env := map[string]string{"E": "v"}
		if strings.Count(tc.body, "deadline") == 0 && tc.err == "" {
			env = nil
		}
		got, dl, err := Activation([]byte(tc.body), env)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: got %s, %v; want an error saying %q", tc.body, got, err, tc.err)
			}
			continue
		}
		if err != nil || string(got) != tc.want || (tc.deadline != 0 && dl.UnixMilli() != tc.deadline) || (tc.deadline == 0 && !dl.IsZero()) {
			t.Errorf("%s: got %s, %v, %v\nwant %s", tc.body, got, dl, err, tc.want)
		}
	}
}

// FuzzActivation: whatever /run's body, either a clear error or one line
// of JSON that holds the body's value as an object.
func FuzzActivation(f *testing.F) {
	f.Add([]byte(`{"value":{"x":1},"activation_id":"a","deadline":"1700000000000"}`))
	f.Add([]byte(`{"value":{}}`))
	f.Add([]byte(`{"value":[1]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := Activation(b, map[string]string{"K": "v"})
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if bytes.IndexByte(out, '\n') >= 0 || json.Unmarshal(out, &m) != nil || len(m["value"]) == 0 || m["value"][0] != '{' {
			t.Errorf("accepted %q as %q", b, out)
		}
	})
}

// FuzzInit: /init's body never panics, and a refused one leaves the
// gateway uninitialized.
func FuzzInit(f *testing.F) {
	f.Add([]byte(`{"value":{"main":"cat","env":{"A":"b"}}}`))
	f.Add([]byte(`{"value":{"code":"x"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := New(Config{Mode: ModeOpenWhisk, Stdout: io.Discard, Stderr: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/init", bytes.NewReader(b)))
		if (w.Code == 200) != g.inited {
			t.Errorf("%q: %d, initialized %v", b, w.Code, g.inited)
		}
		if g.inited && (len(g.handler) != 1 || checkHandler(g.handler[0]) != nil) {
			t.Errorf("%q: handler %q", b, g.handler)
		}
	})
}

func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		addr, network string
		node          bool
		ok            bool
	}{
		{":8080", "pod", false, true},
		{"0.0.0.0:8080", "", false, true},
		{"127.0.0.1:8080", "node", false, true},
		{"[::1]:8080", "node", false, true},
		{"localhost:8080", "node", false, true},
		{":8080", "node", false, false},
		{"0.0.0.0:8080", "node", false, false},
		{"10.0.2.15:8080", "node", false, false},
		{"[::]:8080", "node", false, false},
		{":8080", "node", true, true},
		{"8080", "pod", false, false},
	} {
		err := CheckListen(tc.addr, tc.network, tc.node)
		if (err == nil) != tc.ok || (err != nil && !errdefs.IsInvalidArgument(err)) {
			t.Errorf("CheckListen(%q, %q, %v) = %v, want ok %v", tc.addr, tc.network, tc.node, err, tc.ok)
		}
	}
	err := CheckListen(":8080", "node", false)
	if err == nil || !strings.Contains(err.Error(), "this container is on the node's network (SWIFT_NETWORK=node)") {
		t.Errorf("refusal %v does not say why", err)
	}
}

// TestLogMarkers: a function's stderr ends its line before the marker, and
// a marker the function prints itself does not end its activation's log.
func TestLogMarkers(t *testing.T) {
	b := newBed(t, Config{Mode: ModeOpenWhisk, Handler: []string{"exit", "0"}})
	if code, _, _ := b.post(t, "/run", `{"value":{}}`); code != 502 {
		t.Fatalf("exit 0 without output: %d, want 502 (no dictionary)", code)
	}
	if got, want := b.stderr.String(), "exiting 0\n"+ActivationMarker+"\n"; got != want {
		t.Errorf("log %q, want %q", got, want)
	}
	var g Gateway
	g.cfg.MaxLog, g.cfg.Stderr = 1000, &syncBuf{}
	g.copyLog(strings.NewReader("a" + ActivationMarker + "b"))
	if got := g.cfg.Stderr.(*syncBuf).String(); got != "a(activation marker)b\n" {
		t.Errorf("a function's own marker: %q", got)
	}
}

// TestAdmitFirst: beyond the requests that may run and wait, 429 before
// the body is read: a large body costs the gateway nothing.
func TestAdmitFirst(t *testing.T) {
	b := newBed(t, Config{Mode: ModeOpenWhisk, Handler: []string{"sleep", "500"}, Concurrency: 1, MaxBody: 100})
	done := make(chan int)
	go func() {
		code, _, _ := b.post(t, "/run", `{"value":{}}`)
		done <- code
	}()
	time.Sleep(100 * time.Millisecond)
	if code, body, _ := b.post(t, "/run", `{"value":{"p":"`+strings.Repeat("a", 5000)+`"}}`); code != 429 {
		t.Errorf("a large body while the slot is taken: %d %s, want 429 (not 413: it was not read)", code, body)
	}
	<-done
	// the refused activation's log ends with its markers too
	if got := strings.Count(b.stdout.String(), ActivationMarker+"\n"); got != 2 {
		t.Errorf("%d markers for two /run requests, want 2", got)
	}
}

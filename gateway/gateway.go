package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"golang.org/x/net/netutil"

	"github.com/swift-rdma/swift-containerd/swiftrun"
)

// Mode is the contract the gateway speaks.
type Mode string

// The modes.
const (
	ModeOpenWhisk Mode = "openwhisk"
	ModeHTTP      Mode = "http"
)

// Defaults of Config's bounds.
const (
	DefaultMaxBody       = 1 << 20
	DefaultMaxResult     = 1 << 20
	DefaultMaxLog        = 64 << 10
	DefaultTimeout       = 60 * time.Second
	DefaultHeaderTimeout = 5 * time.Second
	DefaultBodyTimeout   = 10 * time.Second
	// MaxConcurrency is the zygote's bound on functions at once
	// (SWIFT_MAX_CHILDREN).
	MaxConcurrency = 128
	maxEnv         = 64
	maxEnvBytes    = 64 << 10
)

// ActivationMarker ends each activation's output in the container's log,
// on stdout and on stderr, as OpenWhisk's invoker expects.
const ActivationMarker = "XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX"

// Config is the gateway's configuration.
type Config struct {
	Mode Mode
	// Zygote forks the functions.
	Zygote *swiftrun.Client
	// Handler is the handler and its arguments. ModeHTTP needs one; in
	// ModeOpenWhisk it pins the handler (/init may not name another),
	// and without it /init's "main" names it.
	Handler []string
	// Peer, QPs and NoQP: the QPs each function gets (swiftrun.Request).
	Peer string
	QPs  int
	NoQP bool
	// Peers are the peers a request's Swift-Peer header may name instead
	// of Peer (ModeHTTP); without them the header is refused.
	Peers []string
	// MaxConns bounds the client connections open at once (Listen).
	MaxConns int
	// Concurrency is how many functions run at once, Queue how many
	// requests may wait beyond that; the rest are answered 429 at once.
	Concurrency, Queue int
	// MaxBody bounds a request's body, MaxResult a function's stdout,
	// MaxLog what of a function's stderr reaches the log, in bytes.
	MaxBody, MaxResult, MaxLog int64
	// Timeout bounds an activation (an OpenWhisk deadline may be sooner).
	Timeout time.Duration
	// HeaderTimeout and BodyTimeout bound how long a client may take to
	// send its request's header and body.
	HeaderTimeout, BodyTimeout time.Duration
	// Stdout and Stderr are the container's log: functions' stderr and
	// the activation markers go there.
	Stdout, Stderr io.Writer
	// Warm is the baseline a fork start is measured against: one
	// long-lived function (the handler, which must serve a line of input
	// with a line of output, as `roundtrip serve` does) serves every
	// request, one at a time, with no fork and no isolation between them.
	Warm bool
}

// Gateway is an http.Handler that forks a function per request.
type Gateway struct {
	cfg   Config
	slots chan struct{}
	queue chan struct{}

	mu      sync.Mutex
	handler []string          // what /init chose (ModeOpenWhisk), else cfg.Handler
	env     map[string]string // /init's env
	inited  bool
	logMu   sync.Mutex
	warm    warm

	healthMu  sync.Mutex
	healthAt  time.Time
	healthErr error
}

// builtinName is the form of a built-in handler's name; any other handler
// is a shared object named by its absolute path.
var builtinName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// New checks cfg and fills in its defaults.
func New(cfg Config) (*Gateway, error) {
	switch cfg.Mode {
	case ModeOpenWhisk, ModeHTTP:
	default:
		return nil, fmt.Errorf("mode %q: want %q or %q: %w", cfg.Mode, ModeOpenWhisk, ModeHTTP, errdefs.ErrInvalidArgument)
	}
	if cfg.Zygote == nil {
		cfg.Zygote = &swiftrun.Client{}
	}
	if cfg.Mode == ModeHTTP && len(cfg.Handler) == 0 {
		return nil, fmt.Errorf("mode http needs a handler: %w", errdefs.ErrInvalidArgument)
	}
	if len(cfg.Handler) > 0 {
		if err := checkHandler(cfg.Handler[0]); err != nil {
			return nil, err
		}
	}
	def := func(v *int64, d int64, what string) error {
		if *v == 0 {
			*v = d
		}
		if *v < 0 {
			return fmt.Errorf("%s %d: want a positive number of bytes: %w", what, *v, errdefs.ErrInvalidArgument)
		}
		return nil
	}
	for _, x := range []struct {
		v    *int64
		d    int64
		what string
	}{{&cfg.MaxBody, DefaultMaxBody, "max body"}, {&cfg.MaxResult, DefaultMaxResult, "max result"}, {&cfg.MaxLog, DefaultMaxLog, "max log"}} {
		if err := def(x.v, x.d, x.what); err != nil {
			return nil, err
		}
	}
	for _, x := range []struct {
		v    *time.Duration
		d    time.Duration
		what string
	}{{&cfg.Timeout, DefaultTimeout, "timeout"}, {&cfg.HeaderTimeout, DefaultHeaderTimeout, "header timeout"}, {&cfg.BodyTimeout, DefaultBodyTimeout, "body timeout"}} {
		if *x.v == 0 {
			*x.v = x.d
		}
		if *x.v < 0 {
			return nil, fmt.Errorf("%s %v: want a positive duration: %w", x.what, *x.v, errdefs.ErrInvalidArgument)
		}
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 1
	}
	if cfg.Concurrency < 1 || cfg.Concurrency > MaxConcurrency {
		return nil, fmt.Errorf("concurrency %d: want 1 to %d (the zygote's bound on functions at once): %w", cfg.Concurrency, MaxConcurrency, errdefs.ErrInvalidArgument)
	}
	if cfg.Queue < 0 || cfg.Queue > 4096 {
		return nil, fmt.Errorf("queue %d: want 0 to 4096: %w", cfg.Queue, errdefs.ErrInvalidArgument)
	}
	if cfg.QPs < 0 || cfg.QPs > swiftrun.QPsMax {
		return nil, fmt.Errorf("qps %d: want 0 to %d: %w", cfg.QPs, swiftrun.QPsMax, errdefs.ErrInvalidArgument)
	}
	if cfg.NoQP && (cfg.QPs > 0 || cfg.Peer != "") {
		return nil, fmt.Errorf("no-qp with a peer or a QP count: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Warm && cfg.Concurrency != 1 {
		return nil, fmt.Errorf("warm: one long-lived function serves one request at a time: concurrency must be 1: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 1024
	}
	if cfg.MaxConns < 1 {
		return nil, fmt.Errorf("max conns %d: want at least 1: %w", cfg.MaxConns, errdefs.ErrInvalidArgument)
	}
	for _, p := range cfg.Peers {
		if _, err := (swiftrun.Request{Peer: p, Args: []string{"noop"}}).MarshalBinary(); err != nil || p == "" {
			return nil, fmt.Errorf("peers: %q is no peer name: %w", p, errdefs.ErrInvalidArgument)
		}
	}
	if cfg.Warm && len(cfg.Peers) > 0 {
		return nil, fmt.Errorf("warm: one long-lived function holds one peer's QP: no peers to choose from: %w", errdefs.ErrInvalidArgument)
	}
	if cfg.Stdout == nil {
		cfg.Stdout = os.Stdout
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	// the request for the configured handler must be one the zygote reads
	if len(cfg.Handler) > 0 {
		if _, err := (swiftrun.Request{Peer: cfg.Peer, QPs: cfg.QPs, Args: cfg.Handler}).MarshalBinary(); err != nil {
			return nil, err
		}
	}
	return &Gateway{cfg: cfg, slots: make(chan struct{}, cfg.Concurrency), queue: make(chan struct{}, cfg.Concurrency+cfg.Queue),
		handler: cfg.Handler}, nil
}

// checkHandler: a built-in's name, or the absolute, clean path of a
// shared object that exists in the container.
func checkHandler(h string) error {
	if builtinName.MatchString(h) {
		return nil
	}
	if !filepath.IsAbs(h) || filepath.Clean(h) != h || len(h) > 1024 {
		return fmt.Errorf("handler %.80q: a built-in's name or the absolute, clean path of a shared object: %w", h, errdefs.ErrInvalidArgument)
	}
	// whether it is missing, unreadable or no file at all is not told
	if fi, err := os.Stat(h); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("handler %.200s: no such shared object: %w", h, errdefs.ErrNotFound)
	}
	return nil
}

// Listen is the listener for addr, at most MaxConns connections at once.
func (g *Gateway) Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return netutil.LimitListener(ln, g.cfg.MaxConns), nil
}

// Server is an http.Server for g on addr with g's bounds on clients.
func (g *Gateway) Server(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           g,
		ReadHeaderTimeout: g.cfg.HeaderTimeout,
		ReadTimeout:       g.cfg.HeaderTimeout + g.cfg.BodyTimeout,
		WriteTimeout:      g.cfg.HeaderTimeout + g.cfg.BodyTimeout + g.cfg.Timeout + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
}

// ServeHTTP routes by mode.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.cfg.Mode == ModeOpenWhisk {
		switch r.URL.Path {
		case "/init":
			g.post(w, r, g.init)
		case "/run":
			// every activation's log ends with the markers, refused or not
			defer g.marker()
			release, ok := g.admit(w, true)
			if !ok {
				return
			}
			defer release()
			g.post(w, r, g.runOW)
		default:
			jsonError(w, http.StatusNotFound, fmt.Sprintf("no such path %q: an OpenWhisk action serves POST /init and POST /run", r.URL.Path))
		}
		return
	}
	if r.URL.Path == "/.swift/healthz" && r.Method == http.MethodGet {
		g.health(w, r)
		return
	}
	release, ok := g.admit(w, false)
	if !ok {
		return
	}
	defer release()
	g.runHTTP(w, r)
}

func (g *Gateway) post(w http.ResponseWriter, r *http.Request, h func(http.ResponseWriter, *http.Request, []byte)) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		jsonError(w, http.StatusMethodNotAllowed, fmt.Sprintf("%s %s: want POST", r.Method, r.URL.Path))
		return
	}
	body, code, err := g.readBody(w, r)
	if err != nil {
		jsonError(w, code, err.Error())
		return
	}
	h(w, r, body)
}

// readBody reads the whole body within the bounds: 413 beyond MaxBody,
// 408 when the client is too slow.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	if r.ContentLength > g.cfg.MaxBody {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body of %d bytes exceeds the gateway's bound of %d bytes", r.ContentLength, g.cfg.MaxBody)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.cfg.MaxBody))
	var tooBig *http.MaxBytesError
	var ne interface{ Timeout() bool }
	switch {
	case err == nil:
		return b, 0, nil
	case errors.As(err, &tooBig):
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("request body exceeds the gateway's bound of %d bytes", g.cfg.MaxBody)
	case errors.As(err, &ne) && ne.Timeout():
		return nil, http.StatusRequestTimeout, fmt.Errorf("the request body did not arrive within %v", g.cfg.HeaderTimeout+g.cfg.BodyTimeout)
	}
	return nil, http.StatusBadRequest, fmt.Errorf("read the request body: %v", err)
}

func jsonError(w http.ResponseWriter, code int, msg string) {
	b, _ := json.Marshal(map[string]string{"error": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(b, '\n'))
}

// initBody is /init's: {"value": {...}}.
type initBody struct {
	Value *struct {
		Name   string          `json:"name"`
		Main   string          `json:"main"`
		Code   json.RawMessage `json:"code"`
		Binary bool            `json:"binary"`
		Env    json.RawMessage `json:"env"`
	} `json:"value"`
}

func (g *Gateway) init(w http.ResponseWriter, r *http.Request, body []byte) {
	var in initBody
	if err := strictJSON(body, &in); err != nil {
		jsonError(w, http.StatusBadRequest, "/init: "+err.Error())
		return
	}
	if in.Value == nil {
		jsonError(w, http.StatusBadRequest, `/init: the body has no "value" object`)
		return
	}
	v := in.Value
	if len(v.Code) > 0 && string(v.Code) != `""` && string(v.Code) != "null" {
		jsonError(w, http.StatusBadRequest, `/init: "code" given: this action runs a handler of its image (a built-in or a shared object), never code sent to it`)
		return
	}
	env, err := parseEnv(v.Env)
	if err != nil {
		jsonError(w, http.StatusBadRequest, "/init: "+err.Error())
		return
	}
	handler := g.cfg.Handler
	switch {
	case len(handler) > 0 && v.Main != "" && v.Main != "main" && v.Main != handler[0]:
		jsonError(w, http.StatusForbidden, fmt.Sprintf("/init: main %.80q: this action container runs handler %s only", v.Main, handler[0]))
		return
	case len(handler) == 0 && (v.Main == "" || v.Main == "main"):
		jsonError(w, http.StatusBadRequest, `/init: "main" must name the handler: a built-in's name or a shared object's path in the image`)
		return
	case len(handler) == 0:
		if err := checkHandler(v.Main); err != nil {
			jsonError(w, http.StatusBadRequest, "/init: main: "+err.Error())
			return
		}
		handler = []string{v.Main}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inited {
		jsonError(w, http.StatusForbidden, "Cannot initialize the action more than once.")
		return
	}
	g.inited, g.handler, g.env = true, handler, env
	log.G(r.Context()).WithField("handler", handler[0]).WithField("action", v.Name).Info("initialized")
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte("{\"ok\":true}\n"))
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// parseEnv: /init's env, names to string values, bounded.
func parseEnv(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if len(raw) > maxEnvBytes {
		return nil, fmt.Errorf(`"env" of %d bytes: at most %d`, len(raw), maxEnvBytes)
	}
	var env map[string]string
	if err := json.Unmarshal(raw, &env); err != nil {
		return nil, fmt.Errorf(`"env" must be an object of strings: %v`, err)
	}
	if len(env) > maxEnv {
		return nil, fmt.Errorf(`"env" has %d names: at most %d`, len(env), maxEnv)
	}
	for k := range env {
		if !envName.MatchString(k) {
			return nil, fmt.Errorf(`"env" name %.80q: letters, digits and _, not first a digit`, k)
		}
	}
	return env, nil
}

// strictJSON decodes exactly one JSON value into v.
func strictJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("malformed JSON: %v", err)
	}
	if d.More() {
		return errors.New("malformed JSON: more than one value")
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("malformed JSON: trailing data")
	}
	return nil
}

// runBody is /run's: the activation.
type runBody struct {
	Value         json.RawMessage   `json:"value"`
	Namespace     string            `json:"namespace,omitempty"`
	ActionName    string            `json:"action_name,omitempty"`
	ActionVersion string            `json:"action_version,omitempty"`
	ActivationID  string            `json:"activation_id,omitempty"`
	TransactionID string            `json:"transaction_id,omitempty"`
	APIHost       string            `json:"api_host,omitempty"`
	APIKey        string            `json:"api_key,omitempty"`
	Deadline      json.RawMessage   `json:"deadline,omitempty"`
	Env           map[string]string `json:"env,omitempty"`
}

// deadline: OpenWhisk's, milliseconds since the epoch, as a string or a
// number; zero when absent.
func (b *runBody) deadline() (time.Time, error) {
	if len(b.Deadline) == 0 || string(b.Deadline) == "null" {
		return time.Time{}, nil
	}
	s := string(b.Deadline)
	if s[0] == '"' {
		if err := json.Unmarshal(b.Deadline, &s); err != nil {
			return time.Time{}, err
		}
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}, fmt.Errorf(`"deadline" %.40s: want milliseconds since the epoch`, string(b.Deadline))
	}
	return time.UnixMilli(ms), nil
}

func (g *Gateway) runOW(w http.ResponseWriter, r *http.Request, body []byte) {
	g.mu.Lock()
	handler, env, inited := g.handler, g.env, g.inited
	g.mu.Unlock()
	if !inited && len(handler) == 0 {
		jsonError(w, http.StatusInternalServerError, "no action defined yet: POST /init first")
		return
	}
	stdin, dl, err := Activation(body, env)
	if err != nil {
		jsonError(w, http.StatusBadRequest, "/run: "+err.Error())
		return
	}
	res := g.invoke(r.Context(), swiftrun.Request{Peer: g.cfg.Peer, QPs: g.cfg.QPs, Flags: g.flags(), Args: handler}, stdin, dl)
	setTimes(w, res)
	if res.err != nil {
		jsonError(w, res.code, res.err.Error())
		return
	}
	out := bytes.TrimSpace(res.stdout)
	if len(out) == 0 || out[0] != '{' || !json.Valid(out) {
		jsonError(w, http.StatusBadGateway, "The action did not return a dictionary.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(out, '\n'))
}

// Activation reads /run's body and returns what the function gets on
// stdin: one line of JSON holding the activation's value (an object), its
// fields, the deadline as milliseconds since the epoch, and /init's env;
// and the deadline (zero when the body names none).
func Activation(body []byte, env map[string]string) ([]byte, time.Time, error) {
	var in runBody
	if err := strictJSON(body, &in); err != nil {
		return nil, time.Time{}, err
	}
	if len(in.Value) == 0 || in.Value[0] != '{' {
		return nil, time.Time{}, errors.New(`"value" must be a JSON object`)
	}
	dl, err := in.deadline()
	if err != nil {
		return nil, time.Time{}, err
	}
	in.Deadline = nil
	if !dl.IsZero() {
		in.Deadline = json.RawMessage(strconv.FormatInt(dl.UnixMilli(), 10))
	}
	in.Env = env
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&in); err != nil {
		return nil, time.Time{}, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), dl, nil
}

func (g *Gateway) flags() swiftrun.Flags {
	if g.cfg.NoQP {
		return swiftrun.NoQP
	}
	return 0
}

// PeerHeader names, in ModeHTTP, the peer whose QPs a request's function
// gets (default: the gateway's --peer).
const PeerHeader = "Swift-Peer"

func (g *Gateway) runHTTP(w http.ResponseWriter, r *http.Request) {
	body, code, err := g.readBody(w, r)
	if err != nil {
		http.Error(w, err.Error(), code)
		return
	}
	peer := g.cfg.Peer
	if p := r.Header.Get(PeerHeader); p != "" && p != peer {
		if !slices.Contains(g.cfg.Peers, p) {
			http.Error(w, fmt.Sprintf("%s: %.40q is not among the peers this gateway lets a request choose (--peers)", PeerHeader, p), http.StatusBadRequest)
			return
		}
		peer = p
	}
	req := swiftrun.Request{Peer: peer, QPs: g.cfg.QPs, Flags: g.flags(), Args: g.cfg.Handler}
	if _, err := req.MarshalBinary(); err != nil {
		http.Error(w, PeerHeader+": "+err.Error(), http.StatusBadRequest)
		return
	}
	res := g.invoke(r.Context(), req, body, time.Time{})
	setTimes(w, res)
	if res.err != nil {
		http.Error(w, res.err.Error(), res.code)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(res.stdout)
}

// health asks the zygote for its status at most once a second, one asker
// at a time; the others get the last answer.
func (g *Gateway) health(w http.ResponseWriter, r *http.Request) {
	g.healthMu.Lock()
	if time.Since(g.healthAt) > time.Second {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		_, g.healthErr = g.cfg.Zygote.Status(ctx)
		cancel()
		g.healthAt = time.Now()
	}
	err := g.healthErr
	g.healthMu.Unlock()
	if err != nil {
		log.G(r.Context()).WithError(err).Warn("health: the zygote")
		http.Error(w, "the zygote does not answer", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ok\n"))
}

// setTimes tells the client the zygote's time to fork and the gateway's
// whole time for the function.
func setTimes(w http.ResponseWriter, res result) {
	if res.forked {
		w.Header().Set("Swift-Fork-Us", strconv.FormatInt(res.fork.Microseconds(), 10))
		w.Header().Set("Swift-Function-Us", strconv.FormatInt(res.took.Microseconds(), 10))
	}
}

// marker ends an activation's log.
func (g *Gateway) marker() {
	g.logMu.Lock()
	defer g.logMu.Unlock()
	fmt.Fprintln(g.cfg.Stdout, ActivationMarker)
	fmt.Fprintln(g.cfg.Stderr, ActivationMarker)
}

// result is one function's outcome: its stdout, or an error and the HTTP
// status that says it.
type result struct {
	stdout []byte
	err    error
	code   int
	forked bool
	fork   time.Duration
	took   time.Duration
}

func fail(code int, format string, a ...any) result {
	return result{err: fmt.Errorf(format, a...), code: code}
}

// admit takes one of the tokens of the requests that may run or wait,
// before anything of the request is read: beyond them, 429 at once.
func (g *Gateway) admit(w http.ResponseWriter, asJSON bool) (func(), bool) {
	select {
	case g.queue <- struct{}{}:
		return func() { <-g.queue }, true
	default:
	}
	msg := fmt.Sprintf("too many requests: %d functions run (the gateway's concurrency) and %d wait", g.cfg.Concurrency, g.cfg.Queue)
	if asJSON {
		jsonError(w, http.StatusTooManyRequests, msg)
	} else {
		http.Error(w, msg, http.StatusTooManyRequests)
	}
	return nil, false
}

// invoke waits for a slot, forks the function with stdin, and collects its
// stdout until it ends, the deadline (or the gateway's Timeout) passes, or
// its stdout outgrows MaxResult.
func (g *Gateway) invoke(ctx context.Context, req swiftrun.Request, stdin []byte, deadline time.Time) result {
	limit := time.Now().Add(g.cfg.Timeout)
	if deadline.IsZero() || deadline.After(limit) {
		deadline = limit
	}
	if !time.Now().Before(deadline) {
		return fail(http.StatusBadGateway, "the activation's deadline has passed")
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		return fail(http.StatusServiceUnavailable, "no function slot came free before the deadline (concurrency %d)", g.cfg.Concurrency)
	}
	defer func() { <-g.slots }()
	if g.cfg.Warm {
		return g.warm.serve(ctx, g, req, stdin)
	}
	return g.run(ctx, req, stdin)
}

func (g *Gateway) run(ctx context.Context, req swiftrun.Request, stdin []byte) result {
	t0 := time.Now()
	fn, inW, outR, errR, err := g.fork(ctx, req)
	if err != nil {
		var refused *swiftrun.RefusedError
		switch {
		case errors.Is(err, errPipe):
			return fail(http.StatusInternalServerError, "%v", err)
		case errors.As(err, &refused) && (errdefs.IsResourceExhausted(err) || errdefs.IsUnavailable(err)):
			return fail(http.StatusServiceUnavailable, "%v", err)
		case errors.As(err, &refused):
			return fail(http.StatusBadGateway, "%v", err)
		case ctx.Err() != nil:
			return fail(http.StatusBadGateway, "the activation's deadline passed before the zygote forked the function")
		}
		log.G(ctx).WithError(err).Warn("fork a function")
		return fail(http.StatusServiceUnavailable, "the zygote does not answer")
	}
	defer inW.Close()
	defer outR.Close()
	defer errR.Close()
	defer fn.Close()
	res := result{forked: true, fork: fn.ZygoteTime}
	go func() {
		inW.Write(stdin)
		inW.Close()
	}()
	logged := make(chan struct{})
	go func() {
		defer close(logged)
		g.copyLog(errR)
	}()
	type read struct {
		b    []byte
		over bool
		err  error
	}
	outc := make(chan read, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(outR, g.cfg.MaxResult+1))
		over := int64(len(b)) > g.cfg.MaxResult
		if over {
			fn.Close() // ends the function
		}
		outc <- read{b, over, err}
	}()
	ws, werr := fn.Wait(ctx)
	res.took = time.Since(t0)
	// its stdout closes when it has ended; whatever it left is killed
	var out read
	select {
	case out = <-outc:
	case <-time.After(2 * time.Second):
		outR.SetReadDeadline(time.Unix(1, 0))
		out = <-outc
	}
	select {
	case <-logged:
	case <-time.After(time.Second):
		errR.SetReadDeadline(time.Unix(1, 0))
		<-logged
	}
	switch {
	case out.over:
		return fail(http.StatusBadGateway, "the function's result exceeds the gateway's bound of %d bytes: it was ended", g.cfg.MaxResult)
	case werr != nil && ctx.Err() != nil:
		r := fail(http.StatusBadGateway, "the function did not end by the activation's deadline: it was ended")
		r.forked, r.fork, r.took = true, res.fork, res.took
		return r
	case werr != nil:
		return fail(http.StatusBadGateway, "%v", werr)
	case ws.Signaled():
		return fail(http.StatusBadGateway, "the function was killed by signal %d (%v)", int(ws.Signal()), ws.Signal())
	case ws.ExitStatus() != 0:
		return fail(http.StatusBadGateway, "the function exited with status %d", ws.ExitStatus())
	case out.err != nil:
		return fail(http.StatusBadGateway, "read the function's result: %v", out.err)
	}
	res.stdout = out.b
	return res
}

// copyLog copies a function's stderr to the log, at most MaxLog bytes of
// it; the rest is read and dropped, with a note.
func (g *Gateway) copyLog(r io.Reader) {
	b, _ := io.ReadAll(io.LimitReader(r, g.cfg.MaxLog))
	n, _ := io.Copy(io.Discard, r)
	// a function's own marker would end its activation's log early
	b = bytes.ReplaceAll(b, []byte(ActivationMarker), []byte("(activation marker)"))
	if len(b) > 0 && b[len(b)-1] != '\n' {
		b = append(b, '\n')
	}
	g.logMu.Lock()
	defer g.logMu.Unlock()
	g.cfg.Stderr.Write(b)
	if n > 0 {
		fmt.Fprintf(g.cfg.Stderr, "swift-gateway: the function's stderr was cut at %d bytes (%d more dropped)\n", g.cfg.MaxLog, n)
	}
}

// errPipe marks fork's failures to make a pipe, the gateway's own.
var errPipe = errors.New("pipe")

// fork has the zygote fork a function on three new pipes. The function's
// ends are passed and closed here; the gateway's (the function's stdin to
// write, its stdout and stderr to read) are returned, or closed when
// there is no function.
func (g *Gateway) fork(ctx context.Context, req swiftrun.Request) (fn *swiftrun.Function, in, out, errs *os.File, err error) {
	var near, far [3]*os.File
	defer func() {
		for i := range 3 {
			if far[i] != nil {
				far[i].Close()
			}
			if err != nil && near[i] != nil {
				near[i].Close()
			}
		}
	}()
	for i, what := range []string{"stdin", "stdout", "stderr"} {
		if near[i], far[i], err = pipe(i > 0); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%s %w: %w", what, errPipe, err)
		}
	}
	if fn, err = g.cfg.Zygote.Start(ctx, req, far[0], far[1], far[2]); err != nil {
		return nil, nil, nil, nil, err
	}
	return fn, near[0], near[1], near[2], nil
}

// pipe makes a pipe whose far end (the function's) is blocking and whose
// near end (the gateway's) is non-blocking, so that its reads and writes
// honour deadlines. nearRead: the gateway reads it.
func pipe(nearRead bool) (near, far *os.File, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	n, f := p[1], p[0]
	if nearRead {
		n, f = p[0], p[1]
	}
	if err := syscall.SetNonblock(n, true); err != nil {
		syscall.Close(p[0])
		syscall.Close(p[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(n), "gateway"), os.NewFile(uintptr(f), "function"), nil
}

// CheckListen says whether the gateway may listen on addr. network is
// what the shim told the container (SWIFT_NETWORK): on the node's network
// ("node"), an address other than loopback would serve on the node's
// addresses, which only nodeAddress (the operator's explicit word)
// allows. In a pod's network ("pod", or unknown: not under Swift's
// shim) any address is the pod's.
func CheckListen(addr, network string, nodeAddress bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, errdefs.ErrInvalidArgument.WithMessage(err.Error()))
	}
	if network != "node" || nodeAddress {
		return nil
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("listen address %q: this container is on the node's network (SWIFT_NETWORK=node), where it would serve on the node's addresses: "+
		"listen on loopback (127.0.0.1:PORT), run the container in a network of its own, or say so with --node-address: %w", addr, errdefs.ErrInvalidArgument)
}

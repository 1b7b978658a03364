package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onceflow/onceflow/onceflowhttp"
	"github.com/onceflow/onceflow/store"
)

// IngestReport is what the ingest scenario measured: C HTTP clients posting runs of a
// one-step workflow to the API, a share of them repeating a key already acknowledged,
// while Serve executes the steps.
type IngestReport struct {
	Result
	Clients     int     `json:"clients"`
	RepeatShare float64 `json:"repeat_share"`
	// Requests is how many requests were answered (or failed) in the window.
	Requests          int64   `json:"requests"`
	RequestsPerSecond float64 `json:"requests_per_second"`
	// Keys is how many distinct new keys were sent; RunsInDB how many runs of the
	// workflow the database holds at the end: one per key.
	Keys     int64 `json:"keys"`
	RunsInDB int64 `json:"runs_in_db"`
	// Repeats is how many requests repeated an acknowledged key; Replayed how many of
	// them were answered with the run the key first started, marked Idempotent-Replayed.
	Repeats  int64 `json:"repeats"`
	Replayed int64 `json:"replayed"`
	// Conflicts counts 409 answers: another request with the same key was in progress.
	Conflicts int64 `json:"conflicts"`
	// Errors counts requests that failed or got an unexpected answer.
	Errors int64 `json:"errors"`
	// StepsInWindow is how many steps executed during the window; StepsBehind how many
	// acknowledged runs were still waiting for theirs when it ended; DrainSeconds how long
	// they took after it.
	StepsInWindow int64   `json:"steps_in_window"`
	StepsBehind   int64   `json:"steps_behind"`
	DrainSeconds  float64 `json:"drain_seconds"`
}

// Note implements Report.
func (r *IngestReport) Note() string {
	return fmt.Sprintf("%d clients, %.0f req/s, %d repeats (%d replayed), %d steps behind at the end, drained in %.1f s",
		r.Clients, r.RequestsPerSecond, r.Repeats, r.Replayed, r.StepsBehind, r.DrainSeconds)
}

const ingestWorkflow = "bench-ingest"

func runIngest(ctx context.Context, cfg Config) (Report, error) {
	rep := &IngestReport{Result: cfg.result("ingest"),
		Clients: cfg.Clients, RepeatShare: cfg.RepeatShare}
	err := withDatabase(ctx, cfg.Target, "ingest", func(d *database) error {
		return ingest(ctx, cfg, d, rep, cfg.progress("ingest", d))
	})
	return rep, err
}

func ingest(ctx context.Context, cfg Config, d *database, rep *IngestReport, prog progress) (err error) {
	var executed atomic.Int64
	c, m, err := newClient(d.st, cfg.Workers, ingestWorkflow, 1, &executed)
	if err != nil {
		return err
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	secret := hex.EncodeToString(b[:])

	// The API's handler and HTTP server as `onceflow serve` builds them, with an ingest
	// token and the metrics; no workflow files, webhooks or redaction settings.
	tokens := []onceflowhttp.Token{{Name: "bench", Secret: secret, Scopes: []onceflowhttp.Scope{onceflowhttp.ScopeIngest}}}
	api, err := onceflowhttp.NewHandler(c, onceflowhttp.Options{Tokens: tokens, Metrics: m})
	if err != nil {
		return err
	}
	hs := onceflowhttp.HTTPServer(api)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	eng := serve(ctx, c)
	defer func() {
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		serr := hs.Shutdown(shutdown)
		if e := <-served; !errors.Is(e, http.ErrServerClosed) {
			serr = errors.Join(serr, e)
		}
		err = errors.Join(err, serr, eng.stop())
	}()

	l := &loader{
		addr:  ln.Addr().String(),
		head:  "POST /v1/workflows/" + ingestWorkflow + "/runs HTTP/1.1\r\nHost: " + ln.Addr().String() + "\r\nAuthorization: Bearer " + secret + "\r\nContent-Type: application/json\r\n",
		share: cfg.RepeatShare,
	}
	t0 := time.Now()
	end := t0.Add(cfg.IngestDuration)
	stop := prog.phase("", func() (float64, string) {
		frac := time.Since(t0).Seconds() / cfg.IngestDuration.Seconds()
		if cfg.IngestRequests > 0 {
			frac = float64(l.requests.Load()) / float64(cfg.IngestRequests)
		}
		n := l.requests.Load()
		return frac, fmt.Sprintf("%d requests, %.0f/s; %d steps executed", n, perSecond(n, time.Since(t0)), executed.Load())
	})
	var lat latencies
	var wg sync.WaitGroup
	var issued atomic.Int64
	for g := range cfg.Clients {
		wg.Go(func() {
			var mine []time.Duration
			conn := &clientConn{}
			defer func() { lat.add(mine); conn.close() }()
			for n := 0; ctx.Err() == nil; n++ {
				if cfg.IngestRequests > 0 {
					if issued.Add(1) > int64(cfg.IngestRequests) {
						return
					}
				} else if !time.Now().Before(end) {
					return
				}
				t := time.Now()
				l.request(ctx, conn, "ingest-"+strconv.Itoa(g)+"-"+strconv.Itoa(n))
				mine = append(mine, time.Since(t))
			}
		})
	}
	wg.Wait()
	window := time.Since(t0)
	rep.StepsInWindow = executed.Load()
	stop()
	if err := ctx.Err(); err != nil {
		return err
	}

	keys := l.keys.Load()
	rep.Requests, rep.Keys = l.requests.Load(), keys
	rep.Repeats, rep.Replayed = l.repeats.Load(), l.replayed.Load()
	rep.Conflicts, rep.Errors = l.conflicts.Load(), l.errors.Load()
	rep.Seconds = secs(window)
	rep.RequestsPerSecond = perSecond(rep.Requests, window)
	rep.StepsPerSecond = perSecond(rep.StepsInWindow, window)
	rep.StepsBehind = max(0, l.acked.len()-rep.StepsInWindow)
	rep.P50Ms, rep.P99Ms, _ = lat.quantiles()
	l.failures.each(rep.fail)

	// Drain: wait for the steps of every run the database holds.
	stop = prog.phase("drain", counted(executed.Load, keys, "steps", t0))
	final, err := countWorkflow(ctx, d.st, ingestWorkflow)
	if err == nil {
		rep.RunsInDB = final.totalRuns()
		var at time.Time
		at, final, err = awaitCompleted(ctx, d.st, ingestWorkflow, rep.RunsInDB, &executed, rep.RunsInDB)
		rep.DrainSeconds = secs(max(0, at.Sub(t0)-window))
	}
	stop()
	if err != nil {
		return err
	}
	rep.Runs = final.runs[store.StateCompleted]
	rep.Steps = final.steps[store.StateCompleted]
	if rep.RunsInDB != keys {
		rep.fail("%d distinct keys sent, but the database holds %d runs", keys, rep.RunsInDB)
	}
	if rep.Replayed+rep.Conflicts != rep.Repeats {
		rep.fail("%d requests repeated a key, %d were answered with the first run, %d with 409", rep.Repeats, rep.Replayed, rep.Conflicts)
	}
	if rep.Errors > 0 {
		rep.fail("%d requests failed", rep.Errors)
	}
	if rep.Steps != rep.RunsInDB {
		rep.fail("%d runs, %d steps completed", rep.RunsInDB, rep.Steps)
	}
	return nil
}

// loader sends the ingest requests and counts their answers. Each client keeps one
// connection (HTTP/1.1 keep-alive) and writes its requests on it itself, as a client on
// another machine would: the in-process load costs the server's two cores as little as
// an HTTP client can, so that the figure measures the server.
type loader struct {
	addr string
	// head is every request's start line and fixed headers.
	head  string
	share float64

	acked                             ackedKeys
	requests, keys, repeats, replayed atomic.Int64
	conflicts, errors                 atomic.Int64
	failures                          failures
}

// clientConn is one client's connection, dialled on its first request and again after
// a failure.
type clientConn struct {
	c    net.Conn
	r    *bufio.Reader
	stop func() bool // ends the watch of the context that closes c
	buf  []byte
}

func (cc *clientConn) close() {
	if cc.c != nil {
		cc.stop()
		_ = cc.c.Close()
		cc.c = nil
	}
}

// roundTrip sends one request on cc (dialling addr if needed) and reads its answer, within
// 30 s; the end of ctx closes the connection.
func (cc *clientConn) roundTrip(ctx context.Context, addr string, req []byte) (*http.Response, []byte, error) {
	if cc.c == nil {
		c, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, nil, err
		}
		cc.c, cc.r = c, bufio.NewReader(c)
		cc.stop = context.AfterFunc(ctx, func() { _ = c.Close() })
	}
	_ = cc.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := cc.c.Write(req); err != nil {
		cc.close()
		return nil, nil, err
	}
	resp, err := http.ReadResponse(cc.r, nil)
	if err != nil {
		cc.close()
		return nil, nil, err
	}
	body := bytes.NewBuffer(cc.buf[:0])
	_, err = body.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	cc.buf = body.Bytes()
	if err != nil || resp.Close {
		cc.close()
	}
	return resp, cc.buf, err
}

// request posts a run on conn: with probability share, of a key already acknowledged;
// otherwise of newKey.
func (l *loader) request(ctx context.Context, conn *clientConn, newKey string) {
	defer l.requests.Add(1)
	key, want, repeat := newKey, int64(0), false
	if l.share > 0 && mrand.Float64() < l.share {
		key, want, repeat = l.acked.pick()
	}
	if repeat {
		l.repeats.Add(1)
	} else {
		key = newKey
		l.keys.Add(1)
	}
	// The body derives from the key, so that a repeat sends the same body.
	body := `{"key":"` + key + `"}`
	req := make([]byte, 0, len(l.head)+len(key)+len(body)+64)
	req = append(req, l.head...)
	req = append(req, "Idempotency-Key: "...)
	req = append(req, key...)
	req = append(req, "\r\nContent-Length: "...)
	req = strconv.AppendInt(req, int64(len(body)), 10)
	req = append(req, "\r\n\r\n"...)
	req = append(req, body...)
	resp, answer, err := conn.roundTrip(ctx, l.addr, req)
	if err != nil {
		if ctx.Err() == nil {
			l.failed("POST %s: %v", key, err)
		}
		return
	}
	var run struct {
		ID int64 `json:"id"`
	}
	switch {
	case resp.StatusCode == http.StatusConflict && repeat:
		l.conflicts.Add(1)
		return
	case resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK:
		l.failed("POST %s: %s: %s", key, resp.Status, strings.TrimSpace(string(answer[:min(len(answer), 300)])))
		return
	}
	if err := json.Unmarshal(answer, &run); err != nil || run.ID == 0 {
		l.failed("POST %s: %s with an answer that names no run (%v)", key, resp.Status, err)
		return
	}
	replayed := resp.Header.Get("Idempotent-Replayed") == "true"
	switch {
	case repeat && replayed && run.ID == want:
		l.replayed.Add(1)
	case repeat:
		l.failed("repeated key %s answered run %d (replayed %v); it first started run %d", key, run.ID, replayed, want)
	case replayed:
		l.failed("new key %s answered as a replay of run %d", key, run.ID)
	default:
		l.acked.add(key, run.ID)
	}
}

func (l *loader) failed(format string, args ...any) {
	l.errors.Add(1)
	l.failures.add(fmt.Sprintf(format, args...))
}

// ackedKeys are the keys whose first request was acknowledged, with their runs.
type ackedKeys struct {
	mu   sync.Mutex
	keys []string
	ids  []int64
}

func (a *ackedKeys) add(key string, id int64) {
	a.mu.Lock()
	a.keys = append(a.keys, key)
	a.ids = append(a.ids, id)
	a.mu.Unlock()
}

// pick returns a random acknowledged key and its run; ok is false while there is none.
func (a *ackedKeys) pick() (key string, id int64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.keys) == 0 {
		return "", 0, false
	}
	i := mrand.IntN(len(a.keys))
	return a.keys[i], a.ids[i], true
}

func (a *ackedKeys) len() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return int64(len(a.keys))
}

// failures keeps the first few failure messages of many goroutines.
type failures struct {
	mu   sync.Mutex
	msgs []string
	more int
}

func (f *failures) add(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.msgs) < 5 {
		f.msgs = append(f.msgs, msg)
	} else {
		f.more++
	}
}

func (f *failures) each(fn func(format string, args ...any)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.msgs {
		fn("%s", m)
	}
	if f.more > 0 {
		fn("… and %d more", f.more)
	}
}

package demo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// DestinationStats is what a simulated destination saw.
type DestinationStats struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Requests counts every request received, faulty or not.
	Requests int `json:"requests"`
	// EffectsApplied counts distinct idempotency keys whose effect was applied.
	EffectsApplied int `json:"effects_applied"`
	// KeyReplays counts requests answered with the stored result of a key already
	// applied: retries made safe by the idempotency key.
	KeyReplays int `json:"key_replays"`
	// FaultsInjected counts requests that were refused or answered badly on purpose.
	FaultsInjected int `json:"faults_injected"`
	// Rejected counts requests refused for their content (422).
	Rejected int `json:"rejected"`
	// DuplicateEffects counts business actions applied more than once, judged by the
	// business id in the request body regardless of the key. It must be 0.
	DuplicateEffects int `json:"duplicate_effects"`
}

// endpoint is one POST route of a destination.
type endpoint struct {
	path string
	// action names the business action; with the body's submission_id it identifies one
	// action for the duplicate count.
	action string
	// reject returns a reason to refuse the request permanently (422), or "".
	reject func(body map[string]any) string
	// result builds the answer for a newly applied effect; n numbers effects.
	result func(body map[string]any, n int) map[string]any
}

// destination is a simulated third-party API that honours Idempotency-Key: a repeated key
// gets the first answer back and applies nothing.
type destination struct {
	name string
	url  string
	plan faultPlan
	// lateBy is how long a "slow" answer waits at most for the caller to give up.
	lateBy time.Duration

	srv      *http.Server
	serveErr chan error
	closing  chan struct{}
	handlers sync.WaitGroup

	mu       sync.Mutex
	arrivals map[string]int    // key → requests received with it
	byKey    map[string][]byte // key → the answer stored when its effect was applied
	actions  map[string]int    // business action → times applied
	seq      int
	stats    DestinationStats
}

// startDestination listens on a free loopback port and serves eps.
func startDestination(name string, plan faultPlan, lateBy time.Duration, eps ...endpoint) (*destination, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: start %s: %w", name, err)
	}
	d := &destination{
		name: name, url: "http://" + ln.Addr().String(), plan: plan, lateBy: lateBy,
		serveErr: make(chan error, 1), closing: make(chan struct{}),
		arrivals: map[string]int{}, byKey: map[string][]byte{}, actions: map[string]int{},
	}
	d.stats.Name, d.stats.URL = name, d.url
	mux := http.NewServeMux()
	for _, ep := range eps {
		mux.Handle("POST "+ep.path, d.track(d.handle(ep)))
	}
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { d.serveErr <- d.srv.Serve(ln) }()
	return d, nil
}

// track counts running handlers so that close can wait for them.
func (d *destination) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.handlers.Add(1)
		defer d.handlers.Done()
		h.ServeHTTP(w, r)
	})
}

// close stops the server and waits for its goroutines.
func (d *destination) close() error {
	close(d.closing)
	err := d.srv.Close()
	if serr := <-d.serveErr; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	d.handlers.Wait()
	return err
}

// Stats returns a copy of the counters.
func (d *destination) Stats() DestinationStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.EffectsApplied = len(d.byKey)
	return s
}

// applied returns how many times the business action of submission sid was applied.
func (d *destination) applied(action, sid string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.actions[action+":"+sid]
}

func (d *destination) handle(ep endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		key := r.Header.Get("Idempotency-Key")
		var body map[string]any
		if err == nil {
			err = json.Unmarshal(raw, &body)
		}
		sid, _ := body["submission_id"].(string)

		d.mu.Lock()
		d.stats.Requests++
		switch {
		case key == "":
			d.mu.Unlock()
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "an Idempotency-Key header is required"})
			return
		case err != nil || sid == "":
			d.mu.Unlock()
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "the body must be a JSON object with a submission_id"})
			return
		}
		d.arrivals[key]++
		f := d.plan.pick(d.name, key, d.arrivals[key])
		switch f {
		case faultUnavailable, faultRateLimited:
			d.stats.FaultsInjected++
			d.mu.Unlock()
			if f == faultUnavailable {
				w.Header().Set("Retry-After", "0")
				writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "temporarily unavailable"})
			} else {
				w.Header().Set("Retry-After", "1")
				writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "slow down"})
			}
			return
		}
		if ep.reject != nil {
			if why := ep.reject(body); why != "" {
				d.stats.Rejected++
				d.mu.Unlock()
				writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": why})
				return
			}
		}
		if prev, ok := d.byKey[key]; ok {
			d.stats.KeyReplays++
			d.mu.Unlock()
			w.Header().Set("Idempotent-Replayed", "true")
			writeRaw(w, http.StatusCreated, prev)
			return
		}
		// Apply the effect.
		action := ep.action + ":" + sid
		d.actions[action]++
		if d.actions[action] > 1 {
			d.stats.DuplicateEffects++
		}
		d.seq++
		answer, _ := json.Marshal(ep.result(body, d.seq))
		d.byKey[key] = answer
		if f != faultNone {
			d.stats.FaultsInjected++
		}
		d.mu.Unlock()

		switch f {
		case faultDropAfterApply:
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					conn.Close()
					return
				}
			}
			panic(http.ErrAbortHandler) // closes the connection without an answer
		case faultSlowAfterApply:
			t := time.NewTimer(d.lateBy)
			defer t.Stop()
			select {
			case <-r.Context().Done(): // the caller gave up
				return
			case <-d.closing:
				return
			case <-t.C:
			}
		}
		writeRaw(w, http.StatusCreated, answer)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.Copy(w, bytes.NewReader(b))
}

// destinations are the three simulated services of the demo.
type destinations struct {
	crm, mailer, chat *destination
}

func (ds *destinations) all() []*destination {
	return []*destination{ds.crm, ds.mailer, ds.chat}
}

// unreachablePrefix marks phone numbers the chat notifier refuses for good.
const unreachablePrefix = "+000"

// startDestinations starts the CRM, the mailer and the chat notifier.
func startDestinations(seed uint64, lateBy time.Duration) (*destinations, error) {
	plan := faultPlan{seed: seed}
	ds := &destinations{}
	var err error
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	ds.crm, err = startDestination("crm", plan, lateBy,
		endpoint{path: "/leads", action: "lead", result: func(b map[string]any, n int) map[string]any {
			return map[string]any{"lead_id": fmt.Sprintf("L-%05d", n), "submission_id": str(b, "submission_id"), "status": "new"}
		}},
		endpoint{path: "/tasks", action: "task", result: func(b map[string]any, n int) map[string]any {
			return map[string]any{"task_id": fmt.Sprintf("T-%05d", n), "lead_id": str(b, "lead_id"), "title": str(b, "title")}
		}},
	)
	if err != nil {
		return nil, err
	}
	ds.mailer, err = startDestination("mailer", plan, lateBy,
		endpoint{path: "/send", action: "welcome", result: func(b map[string]any, n int) map[string]any {
			return map[string]any{"message_id": fmt.Sprintf("<%d.welcome@mailer.demo>", n), "to": str(b, "to"), "queued": true}
		}},
	)
	if err != nil {
		ds.close()
		return nil, err
	}
	ds.chat, err = startDestination("chat", plan, lateBy,
		endpoint{path: "/messages", action: "notice",
			reject: func(b map[string]any) string {
				to := str(b, "to")
				if to == "" || len(to) >= len(unreachablePrefix) && to[:len(unreachablePrefix)] == unreachablePrefix {
					return fmt.Sprintf("recipient %q has no chat account", to)
				}
				return ""
			},
			result: func(b map[string]any, n int) map[string]any {
				return map[string]any{"message_id": fmt.Sprintf("wamid.%06d", n), "to": str(b, "to"), "status": "sent"}
			}},
	)
	if err != nil {
		ds.close()
		return nil, err
	}
	return ds, nil
}

// close stops every started destination.
func (ds *destinations) close() error {
	var errs []error
	for _, d := range ds.all() {
		if d != nil {
			errs = append(errs, d.close())
		}
	}
	return errors.Join(errs...)
}

package demo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// DestinationStats is what a simulated destination saw, counted by the destination itself.
type DestinationStats struct {
	Name string `json:"name"`
	// Address is the destination's base URL (or host:port for the SMTP server).
	Address string `json:"address"`
	// Deduplicates says whether the destination honours idempotency keys. The SMTP server
	// does not: it delivers every message it accepts.
	Deduplicates bool `json:"deduplicates"`
	// Requests counts every request (SMTP: every message submitted), faulty or not,
	// verify probes included.
	Requests int `json:"requests"`
	// EffectsApplied counts business actions carried out (SMTP: messages delivered).
	EffectsApplied int `json:"effects_applied"`
	// DuplicateEffects counts business actions carried out more than once, judged by the
	// destination's own business identity of a request (a lead's external id, an
	// invoice's order, an e-mail's recipient and subject), whatever key it carried. It
	// must be 0.
	DuplicateEffects int `json:"duplicate_effects"`
	// RepeatedKeys counts requests whose idempotency key (SMTP: Message-ID) had arrived
	// before: the retries the destination saw.
	RepeatedKeys int `json:"repeated_keys"`
	// KeyReplays counts requests answered from the stored result of their key, applying
	// nothing.
	KeyReplays int `json:"key_replays"`
	// VerifyProbes counts lookups asking whether an effect exists (the CRM's verify).
	VerifyProbes int `json:"verify_probes"`
	// FaultsInjected counts requests answered badly on purpose; Faults breaks them down.
	FaultsInjected int            `json:"faults_injected"`
	Faults         map[string]int `json:"faults"`
	// Rejected counts requests refused for their content (HTTP 422).
	Rejected int `json:"rejected"`
}

func (s *DestinationStats) fault(f fault) {
	s.FaultsInjected++
	if s.Faults == nil {
		s.Faults = map[string]int{}
	}
	s.Faults[f.String()]++
}

// copyStats returns s with its own Faults map.
func copyStats(s DestinationStats) DestinationStats {
	f := make(map[string]int, len(s.Faults))
	for k, v := range s.Faults {
		f[k] = v
	}
	s.Faults = f
	return s
}

// applied is what a destination carried out: which business action each effect key
// applied, and how often each business action was applied.
type applied struct {
	keys    map[string]string // effect key → business action
	actions map[string]int    // business action → times applied
}

// sinkStats returns a copy of a sink's counters, with the business actions it applied
// counted; the caller holds the sink's lock.
func sinkStats(stats DestinationStats, actions map[string]int) DestinationStats {
	s := copyStats(stats)
	s.EffectsApplied = len(actions)
	return s
}

// sink is a simulated destination, HTTP or SMTP.
type sink interface {
	Stats() DestinationStats
	applied() applied
	close() error
}

// endpoint is one POST route of an HTTP destination.
type endpoint struct {
	path string
	// action names the business action of a request from its body, the destination's own
	// notion of "the same thing" (regardless of the key); "" means the body is unusable.
	action func(body map[string]any) string
	// reject returns a reason to refuse the request for good (422), or "".
	reject func(body map[string]any) string
	// result builds the answer to a newly applied effect; seq numbers the effects.
	result func(body map[string]any, seq int) map[string]any
}

// lookup is a GET route answering whether a business action was applied: 200 with its
// stored answer, or 404.
type lookup struct {
	pattern string // a ServeMux pattern with one wildcard, {id}
	action  func(id string) string
}

// destination is a simulated third-party HTTP API that honours Idempotency-Key: a
// repeated key gets the first answer back and applies nothing. It fails on purpose as its
// fault plan says.
//
// It closes every connection after one exchange. Go's HTTP client silently re-sends a
// request that carries an Idempotency-Key when a reused keep-alive connection breaks, which
// would hide from onceflow the very failures the demo injects.
type destination struct {
	name  string
	url   string
	token string // the bearer token requests must carry ("" for none)
	plan  faultPlan
	// lateBy bounds how long a late answer waits for the caller to give up.
	lateBy time.Duration

	srv      *http.Server
	serveErr chan error
	closing  chan struct{}
	handlers sync.WaitGroup

	mu       sync.Mutex
	arrivals map[string]int    // key → requests received with it
	byKey    map[string]string // key → the business action it applied
	answers  map[string][]byte // business action → the answer stored when it was applied
	actions  map[string]int    // business action → times applied
	seq      int
	stats    DestinationStats
}

// startDestination listens on a free loopback port and serves eps and lookups.
func startDestination(name, token string, plan faultPlan, lateBy time.Duration, eps []endpoint, lookups ...lookup) (*destination, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: start %s: %w", name, err)
	}
	d := &destination{
		name: name, url: "http://" + ln.Addr().String(), token: token, plan: plan, lateBy: lateBy,
		serveErr: make(chan error, 1), closing: make(chan struct{}),
		arrivals: map[string]int{}, byKey: map[string]string{}, answers: map[string][]byte{}, actions: map[string]int{},
	}
	d.stats = DestinationStats{Name: name, Address: d.url, Deduplicates: true, Faults: map[string]int{}}
	mux := http.NewServeMux()
	for _, ep := range eps {
		mux.Handle("POST "+ep.path, d.track(d.handle(ep)))
	}
	for _, l := range lookups {
		mux.Handle("GET "+l.pattern, d.track(d.find(l)))
	}
	d.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	d.srv.SetKeepAlivesEnabled(false)
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
	return sinkStats(d.stats, d.actions)
}

func (d *destination) applied() applied {
	d.mu.Lock()
	defer d.mu.Unlock()
	return applied{keys: maps.Clone(d.byKey), actions: maps.Clone(d.actions)}
}

// authorized checks the bearer token.
func (d *destination) authorized(r *http.Request) bool {
	return d.token == "" || r.Header.Get("Authorization") == "Bearer "+d.token
}

func (d *destination) handle(ep endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		key := r.Header.Get("Idempotency-Key")
		var body map[string]any
		if err == nil {
			err = json.Unmarshal(raw, &body)
		}
		action := ""
		if err == nil {
			action = ep.action(body)
		}

		d.mu.Lock()
		d.stats.Requests++
		switch {
		case !d.authorized(r):
			d.mu.Unlock()
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "missing or wrong bearer token"})
			return
		case key == "":
			d.mu.Unlock()
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "an Idempotency-Key header is required"})
			return
		case action == "":
			d.mu.Unlock()
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "the body lacks the fields this endpoint needs"})
			return
		}
		d.arrivals[key]++
		if d.arrivals[key] > 1 {
			d.stats.RepeatedKeys++
		}
		f := d.plan.pick(d.name, key, d.arrivals[key])
		switch f {
		case faultUnavailable:
			d.stats.fault(f)
			d.mu.Unlock()
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": "temporarily unavailable"})
			return
		case faultRateLimited:
			d.stats.fault(f)
			d.mu.Unlock()
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "slow down"})
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
			answer := d.answers[prev]
			d.mu.Unlock()
			w.Header().Set("Idempotent-Replayed", "true")
			writeRaw(w, http.StatusCreated, answer)
			return
		}
		// Apply the effect.
		d.actions[action]++
		if d.actions[action] > 1 {
			d.stats.DuplicateEffects++
		}
		d.seq++
		answer, _ := json.Marshal(ep.result(body, d.seq))
		d.byKey[key] = action
		if _, ok := d.answers[action]; !ok {
			d.answers[action] = answer
		}
		if f != faultNone {
			d.stats.fault(f)
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

// find answers a lookup: the stored answer of the business action, or 404.
func (d *destination) find(l lookup) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.stats.Requests++
		d.stats.VerifyProbes++
		if !d.authorized(r) {
			d.mu.Unlock()
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "missing or wrong bearer token"})
			return
		}
		answer, ok := d.answers[l.action(r.PathValue("id"))]
		d.mu.Unlock()
		if !ok {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": "not found"})
			return
		}
		writeRaw(w, http.StatusOK, answer)
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

// destinations are the simulated services the two examples reach.
type destinations struct {
	crm, whatsapp, stock, invoicing *destination
	mail                            *mailbox
	tokens                          map[string]string // env name → token
}

// all returns the destinations in display order (nil for any not started).
func (ds *destinations) all() []sink {
	var out []sink
	for _, d := range []*destination{ds.crm, ds.whatsapp, ds.stock, ds.invoicing} {
		if d != nil {
			out = append(out, d)
		}
	}
	if ds.mail != nil {
		out = append(out, ds.mail)
	}
	return out
}

// unreachablePrefix marks phone numbers WhatsApp refuses for good: numbers with no
// WhatsApp account.
const unreachablePrefix = "+1555"

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

// named returns an action function naming the business action "what value", or "" when
// the body lacks field.
func named(what, field string) func(map[string]any) string {
	return func(b map[string]any) string {
		if v := fmt.Sprint(b[field]); b[field] != nil && v != "" {
			return what + " " + v
		}
		return ""
	}
}

// startDestinations starts the CRM, WhatsApp, stock and invoicing services and the SMTP
// server. tokens are the bearer tokens the CRM, WhatsApp and invoicing require.
func startDestinations(plan faultPlan, lateBy time.Duration, tokens map[string]string) (ds *destinations, err error) {
	ds = &destinations{tokens: tokens}
	defer func() {
		if err != nil {
			ds.close()
		}
	}()
	ds.crm, err = startDestination("crm", tokens["CRM_TOKEN"], plan, lateBy, []endpoint{
		{path: "/leads", action: named("lead", "external_id"), result: func(b map[string]any, n int) map[string]any {
			return map[string]any{"id": fmt.Sprintf("L-%05d", n), "external_id": str(b, "external_id"), "name": str(b, "name"),
				"email": str(b, "email"), "status": "new"}
		}},
		{path: "/tasks", action: named("task for lead", "lead_id"), result: func(b map[string]any, n int) map[string]any {
			return map[string]any{"id": fmt.Sprintf("T-%05d", n), "lead_id": str(b, "lead_id"), "title": str(b, "title")}
		}},
	}, lookup{pattern: "/leads/by-external-id/{id}", action: func(id string) string { return "lead " + id }})
	if err != nil {
		return nil, err
	}
	ds.whatsapp, err = startDestination("whatsapp", tokens["WHATSAPP_TOKEN"], plan, lateBy, []endpoint{
		{path: "/messages", action: named("message to", "to"),
			reject: func(b map[string]any) string {
				if to := str(b, "to"); strings.HasPrefix(to, unreachablePrefix) {
					return fmt.Sprintf("recipient %s is not a WhatsApp user", to)
				}
				return ""
			},
			result: func(b map[string]any, n int) map[string]any {
				return map[string]any{"id": fmt.Sprintf("wamid.%06d", n), "to": str(b, "to"), "status": "accepted"}
			}},
	})
	if err != nil {
		return nil, err
	}
	ds.stock, err = startDestination("stock", "", plan, lateBy, []endpoint{
		{path: "/reservations", action: named("reservation for order", "order_id"), result: func(b map[string]any, n int) map[string]any {
			return map[string]any{"id": fmt.Sprintf("R-%05d", n), "order_id": str(b, "order_id"), "status": "reserved"}
		}},
	})
	if err != nil {
		return nil, err
	}
	ds.invoicing, err = startDestination("invoicing", tokens["INVOICING_TOKEN"], plan, lateBy, []endpoint{
		{path: "/invoices", action: named("invoice for order", "order_id"), result: func(b map[string]any, n int) map[string]any {
			return map[string]any{"id": fmt.Sprintf("in_%06d", n), "number": fmt.Sprintf("INV-2026-%05d", n), "order_id": str(b, "order_id"),
				"amount": b["amount"], "currency": str(b, "currency"), "status": "issued"}
		}},
	})
	if err != nil {
		return nil, err
	}
	ds.mail, err = startMailbox(plan)
	if err != nil {
		return nil, err
	}
	return ds, nil
}

// env returns the variables the example workflows read to reach the destinations.
func (ds *destinations) env() map[string]string {
	env := map[string]string{
		"CRM_URL": ds.crm.url, "WHATSAPP_URL": ds.whatsapp.url, "STOCK_URL": ds.stock.url, "INVOICING_URL": ds.invoicing.url,
		"ONCEFLOW_SMTP_ADDR": ds.mail.addr, "ONCEFLOW_SMTP_TLS": "none",
	}
	for k, v := range ds.tokens {
		env[k] = v
	}
	return env
}

// close stops every started destination.
func (ds *destinations) close() error {
	var errs []error
	for _, d := range ds.all() {
		errs = append(errs, d.close())
	}
	return errors.Join(errs...)
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

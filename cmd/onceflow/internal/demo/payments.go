package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/onceflow/onceflow/internal/signature"
	"github.com/onceflow/onceflow/store"
)

// order is a shop order and what happens to its payment in the scenario.
type order struct {
	ID        string
	PaymentID string
	Amount    int
	Email     string
	// Cancelled: the shop cancelled the order before the payment event arrived.
	Cancelled bool
	// SecondEvent: after the order is paid, another event (a new event id) arrives about
	// the same payment.
	SecondEvent bool
	// Deliveries is how often the provider delivers the event (2 or 3); Together sends the
	// first two at the same instant.
	Deliveries int
	Together   bool
}

func (o order) entity() string { return "order:" + o.ID }

// orders returns m orders. Every seventh (from the fourth) was cancelled before its
// payment arrived; every fifth (from the second) gets a second event for its payment.
func orders(m int) []order {
	out := make([]order, m)
	for i := range out {
		id := fmt.Sprintf("%d", 5001+i)
		out[i] = order{
			ID: id, PaymentID: "pi_demo_" + id, Amount: 1990 + 250*i,
			Email:       fmt.Sprintf("%s.%s@example.com", strings.ToLower(strings.Fields(people[(i+5)%len(people)])[0]), id),
			Cancelled:   i%7 == 3,
			SecondEvent: i%5 == 1,
			Deliveries:  2 + boolInt(i%3 == 0),
			Together:    i%2 == 0,
		}
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// event is a Stripe payment_intent.succeeded event about o's payment.
func (o order) event(eventID string) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": eventID, "object": "event", "type": "payment_intent.succeeded", "livemode": false,
		"data": map[string]any{"object": map[string]any{
			"id": o.PaymentID, "object": "payment_intent", "amount": o.Amount, "currency": "eur", "status": "succeeded",
			"receipt_email": o.Email, "metadata": map[string]any{"order_id": o.ID},
		}},
	})
	return b
}

func (o order) eventID(n int) string { return fmt.Sprintf("evt_demo_%s_%d", o.ID, n) }

// PaymentStats counts the payment provider's deliveries to POST /hooks/payments.
type PaymentStats struct {
	Orders int `json:"orders"`
	// CancelledBeforehand counts orders the shop cancelled before their payment arrived.
	CancelledBeforehand int `json:"cancelled_beforehand"`
	// Events counts distinct event ids; SecondEvents those that are a second event about a
	// payment already handled.
	Events       int `json:"events"`
	SecondEvents int `json:"second_events"`
	// Deliveries counts every signed POST; Started those that started a run, Repeated those
	// answered as a delivery already received.
	Deliveries int `json:"deliveries"`
	Started    int `json:"started"`
	Repeated   int `json:"repeated"`
}

// provider signs and delivers payment events as Stripe does.
type provider struct {
	c      *caller
	secret string
	runs   *runIDs

	mu    sync.Mutex
	stats PaymentStats
}

// cancelOrders cancels, as the shop does, the orders marked cancelled: pending → cancelled,
// by the same guarded transition the workflow's mark_paid uses.
func cancelOrders(ctx context.Context, es store.EntityStore, os []order) error {
	for _, o := range os {
		if !o.Cancelled {
			continue
		}
		res, err := es.EntityTransition(ctx, store.EntityTransitionParams{
			Key: o.entity(), From: []string{"pending"}, Initial: "pending", To: "cancelled",
			EffectKey: "order-cancel:" + o.ID, Actor: "shop", Now: time.Now(),
		})
		if err != nil {
			return fmt.Errorf("demo: cancel order %s: %w", o.ID, err)
		}
		if !res.Applied {
			return fmt.Errorf("demo: cancel order %s: it is %s", o.ID, res.State)
		}
	}
	return nil
}

// deliverAll delivers every order's event 2 or 3 times, the first two at once for every
// other order.
func (p *provider) deliverAll(ctx context.Context, os []order, senders int) {
	p.mu.Lock()
	p.stats.Orders = len(os)
	for _, o := range os {
		p.stats.CancelledBeforehand += boolInt(o.Cancelled)
	}
	p.stats.Events += len(os)
	p.mu.Unlock()
	fanOut(ctx, len(os), senders, func(i int) {
		o := os[i]
		body := o.event(o.eventID(1))
		send := func() { p.deliver(ctx, o.eventID(1), body) }
		n := o.Deliveries
		if o.Together {
			together(send)
			n -= 2
		}
		for range n {
			send()
		}
	})
}

// deliverSecond delivers, once each, a second event about the payment of every order
// marked so.
func (p *provider) deliverSecond(ctx context.Context, os []order) {
	for _, o := range os {
		if !o.SecondEvent {
			continue
		}
		p.mu.Lock()
		p.stats.Events++
		p.stats.SecondEvents++
		p.mu.Unlock()
		p.deliver(ctx, o.eventID(2), o.event(o.eventID(2)))
	}
}

// deliver signs body now and posts it; a provider retries a delivery that failed, so an
// unexpected answer is retried twice before it counts as a problem.
func (p *provider) deliver(ctx context.Context, eventID string, body []byte) {
	cfg := signature.Config{Scheme: signature.Stripe, Secrets: []string{p.secret}}
	var last string
	for range 3 {
		h, err := signature.Sign(cfg, 0, "", time.Now(), body)
		if err != nil {
			p.runs.fail("event %s: sign: %v", eventID, err)
			return
		}
		a, err := p.c.post(ctx, "/hooks/"+paymentsHook, h, body)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			last = err.Error()
			continue
		}
		p.mu.Lock()
		p.stats.Deliveries++
		p.mu.Unlock()
		var got struct {
			RunID     int64 `json:"run_id"`
			Duplicate bool  `json:"duplicate"`
		}
		if a.status != http.StatusOK || json.Unmarshal(a.body, &got) != nil || got.RunID == 0 {
			last = fmt.Sprintf("answered %d: %s", a.status, oneLine(string(a.body), 200))
			continue
		}
		p.mu.Lock()
		if got.Duplicate {
			p.stats.Repeated++
		} else {
			p.stats.Started++
		}
		p.mu.Unlock()
		p.runs.add(eventID, got.RunID)
		return
	}
	p.runs.fail("event %s: %s", eventID, last)
}

func (p *provider) Stats() PaymentStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// waitPaid waits until every order marked for a second event is paid, so that the second
// event arrives about a payment already handled.
func waitPaid(ctx context.Context, es store.EntityStore, os []order) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		waiting := 0
		for _, o := range os {
			if !o.SecondEvent || o.Cancelled {
				continue
			}
			e, err := es.EntityGetByKey(ctx, o.entity())
			if err != nil || e.State != "paid" {
				waiting++
			}
		}
		if waiting == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

package store

import (
	"context"
	"sync/atomic"
	"time"
)

// EventRetentionPurged is appended by RetentionPurge: once per batch it committed, or once
// with zero counts when it found nothing to delete. Its RunID is 0, so no purge ever
// deletes it.
const EventRetentionPurged EventType = "retention.purged"

// ActorRetention is the actor of a purge whose caller names none.
const ActorRetention = "retention"

// DefaultPurgeBatch is the batch size RetentionPurge uses when BatchSize is 0.
const DefaultPurgeBatch = 500

// RetentionPurgeParams are the arguments of RetentionPurge.
type RetentionPurgeParams struct {
	// Now is the present. A completed ledger row whose RetainUntil is at or before Now has
	// expired.
	Now time.Time
	// RunsBefore is the cutoff for runs: a finished run whose last change (UpdatedAt) is
	// before it is deleted with its steps, attempts and events. The zero time deletes no
	// runs; only expired ledger rows are considered then.
	RunsBefore time.Time
	// BatchSize is the most runs, and the most ledger rows, one transaction deletes
	// (default DefaultPurgeBatch).
	BatchSize int
	// DryRun reports what a purge at this moment would delete, and deletes nothing and
	// appends no event.
	DryRun bool
	// Actor names who purges, for the audit event (default ActorRetention).
	Actor string
}

// PurgeCount is how many rows of one kind a purge deleted (or would delete), and the
// oldest and newest of them: by UpdatedAt for runs and steps, StartedAt for attempts, At
// for events, CompletedAt for ledger rows. Oldest and Newest are zero when Count is 0.
type PurgeCount struct {
	Count  int       `json:"count"`
	Oldest time.Time `json:"oldest,omitzero"`
	Newest time.Time `json:"newest,omitzero"`
}

// Add folds another count of the same kind into c.
func (c *PurgeCount) Add(o PurgeCount) {
	if o.Count == 0 {
		return
	}
	if c.Count == 0 || o.Oldest.Before(c.Oldest) {
		c.Oldest = o.Oldest
	}
	if c.Count == 0 || o.Newest.After(c.Newest) {
		c.Newest = o.Newest
	}
	c.Count += o.Count
}

// Observe counts one row whose time is t.
func (c *PurgeCount) Observe(t time.Time) {
	c.Add(PurgeCount{Count: 1, Oldest: t, Newest: t})
}

// PurgeReport is what RetentionPurge deleted, or, for a dry run, would delete.
type PurgeReport struct {
	DryRun   bool       `json:"dry_run"`
	Runs     PurgeCount `json:"runs"`
	Steps    PurgeCount `json:"steps"`
	Attempts PurgeCount `json:"attempts"`
	Events   PurgeCount `json:"events"`
	Effects  PurgeCount `json:"effects"`
	// Batches is the number of transactions that deleted something (0 for a dry run).
	Batches int `json:"batches"`
}

// Add folds the counts of o into r.
func (r *PurgeReport) Add(o *PurgeReport) {
	r.Runs.Add(o.Runs)
	r.Steps.Add(o.Steps)
	r.Attempts.Add(o.Attempts)
	r.Events.Add(o.Events)
	r.Effects.Add(o.Effects)
}

// Empty reports whether the report counts nothing.
func (r *PurgeReport) Empty() bool {
	return r.Runs.Count+r.Steps.Count+r.Attempts.Count+r.Events.Count+r.Effects.Count == 0
}

// RetentionStore deletes what is no longer worth keeping; every Store is one.
//
// Retention is a promise with an end: a completed effect key is remembered (and never
// executed again) until its ledger row's RetainUntil; a zero RetainUntil is forever. Once
// RetentionPurge has deleted an expired row the key is free, and a run that produces it
// again performs the effect again. That is what a retention means, and why a step whose
// duplicate would cost money or stock keeps its keys forever.
type RetentionStore interface {
	// RetentionPurge deletes, in batches of BatchSize, each batch in its own transaction
	// together with one event retention.purged (actor, cutoff, counts):
	//   - runs in state completed, failed or cancelled, every step of which is completed,
	//     failed, skipped or cancelled, whose UpdatedAt is before RunsBefore (none when it is
	//     zero), with their steps, attempts and events;
	//   - completed ledger rows whose non-zero RetainUntil is at or before Now, unless a
	//     run that refers to the key (the run that completed it, or any run with a step
	//     under that key) has an unfinished step.
	// A step is unfinished unless it is completed, failed, skipped or cancelled: pending,
	// processing, retrying, needs_review, or a state added later. It never deletes a run
	// with an unfinished step (a run waiting for review keeps all
	// its attempts and events), a ledger row in flight, one kept forever or one not yet
	// expired, and never an event that belongs to no run (such as retention.purged).
	// When it deleted nothing it appends one retention.purged event with zero counts.
	//
	// It is safe to call from several processes at once: each row is deleted, and
	// counted, by one of them. With DryRun it deletes nothing and appends nothing, and
	// reports exactly the counts a purge with the same parameters would report if nothing
	// changed in between. On an error the report counts the batches that committed
	// before it.
	RetentionPurge(ctx context.Context, p RetentionPurgeParams) (*PurgeReport, error)
}

// PurgeBatches runs a purge as its backend's batches: batch(size, n) deletes batch number
// n in its own transaction and reports it, until one finds nothing; none records the
// purge's event when no batch deleted anything. Backends share it so that every purge
// counts and reports the same way.
func PurgeBatches(p RetentionPurgeParams, batch func(size, n int) (*PurgeReport, error), none func(total *PurgeReport) error) (*PurgeReport, error) {
	size := p.BatchSize
	if size <= 0 {
		size = DefaultPurgeBatch
	}
	total := &PurgeReport{}
	for {
		b, err := batch(size, total.Batches+1)
		if err != nil {
			return total, err
		}
		if b.Empty() {
			break
		}
		total.Add(b)
		total.Batches++
	}
	if total.Batches == 0 {
		if err := none(total); err != nil {
			return total, err
		}
	}
	return total, nil
}

// PurgeCounter is implemented by a store that counts the purges made through it (both of
// onceflow's stores): a client that answers repeated run keys from memory forgets what it
// remembers once a purge may have deleted runs, so that a key whose run this process
// purged starts a new run (purges made by other processes are the caller's to keep older
// than the client's Config.RecentKeysTTL).
type PurgeCounter interface {
	// Purges changes whenever a RetentionPurge that may delete runs begins or ends.
	Purges() uint64
}

// Purges is the count a store's PurgeCounter returns: embed it, and call Begin when a
// purge begins and the function it returns when it ends.
type Purges struct{ n atomic.Uint64 }

// Purges implements PurgeCounter.
func (c *Purges) Purges() uint64 { return c.n.Load() }

// Begin counts a purge that begins, and returns what counts its end.
func (c *Purges) Begin() (end func()) {
	c.n.Add(1)
	return func() { c.n.Add(1) }
}

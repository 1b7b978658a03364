package onceflow

import (
	"context"
	"time"

	"github.com/onceflow/onceflow/internal/groupcommit"
	"github.com/onceflow/onceflow/store"
)

// writeItem is one write handed to the committer of a store.BatchWriter: a start, an
// attempt's record or a claim of up to claim steps. A record with chain set also asks for
// a due step for the worker that recorded it: while steps are due, a worker goes on from
// one to the next without a claim of its own or a trip through the claim loop. The claims
// of a batch are one claim in its transaction.
type writeItem struct {
	start  *store.RunInsertParams
	record *store.StepRecordParams
	chain  bool
	claim  int
}

// writeResult is what the committer returns for one item: a start's result; a record's
// result and the step claimed for its worker, if any; or a claim's result.
type writeResult struct {
	start   store.RunInsertResult
	err     error
	next    *store.ClaimedStep
	claimed *store.ClaimResult
}

// newWrites returns the committer of records and claims together, and of starts too on
// a database with one writer, when the store can write them in one transaction
// (store.BatchWriter); nil otherwise.
func (c *Client) newWrites(cfg groupcommit.Config) *groupcommit.Committer[writeItem, writeResult] {
	bw, ok := c.store.(store.BatchWriter)
	if !ok {
		return nil
	}
	c.startsInWrites = bw.OneWriter()
	if !c.startsInWrites && cfg.Concurrency < 2 {
		// Two batches at once: the database commits one while the next one runs. The
		// claim of a WriteBatch does not wait for run locks another transaction holds, so
		// two batches do not wait for each other's runs (a rare deadlock on a shared
		// effect key is detected by the database and the batch retried).
		cfg.Concurrency = 2
	}
	cfg.Observe = nil // commitWrites observes each kind
	return groupcommit.New(func(ctx context.Context, items []writeItem) ([]writeResult, error) {
		return c.commitWrites(ctx, bw, items)
	}, cfg)
}

// commitWrites writes a batch of starts and records in one transaction, with one claim
// for the claim items and the records that chain: each chaining record gets up to one
// claimed step, then each claim item up to its limit.
func (c *Client) commitWrites(ctx context.Context, bw store.BatchWriter, items []writeItem) ([]writeResult, error) {
	var p store.WriteBatchParams
	limit, claims := 0, 0
	for _, it := range items {
		switch {
		case it.start != nil:
			p.Starts = append(p.Starts, *it.start)
		case it.record != nil:
			p.Records = append(p.Records, *it.record)
			if it.chain {
				limit++
			}
		default:
			limit += it.claim
			claims++
		}
	}
	now := c.now(ctx)
	if limit > 0 {
		p.Claim = c.claimParams(now, limit)
	}
	res, err := bw.WriteBatch(ctx, p)
	took := c.clock.now().Sub(now)
	if len(p.Starts) > 0 {
		c.observeCommit(CommitStarts, len(p.Starts), took, err)
	}
	if len(p.Records) > 0 {
		c.observeCommit(CommitRecords, len(p.Records), took, err)
	}
	if err != nil {
		if claims > 0 {
			c.observeCommit(CommitClaims, 0, took, err)
		}
		return nil, err
	}
	out := make([]writeResult, len(items))
	next := res.Claim.Claimed
	si, ri := 0, 0
	for i, it := range items {
		switch {
		case it.start != nil:
			out[i].start = res.Starts[si]
			si++
		case it.record != nil:
			out[i].err = res.Records[ri]
			ri++
			if it.chain && len(next) > 0 {
				out[i].next, next = next[0], next[1:]
			}
		}
	}
	// The claim items share what is left; the first one also reports what the claim
	// reused, skipped, parked or postponed.
	first := true
	for i, it := range items {
		if it.start != nil || it.record != nil {
			continue
		}
		cr := &store.ClaimResult{}
		if first {
			cr = &store.ClaimResult{Reused: res.Claim.Reused, ReusedSteps: res.Claim.ReusedSteps, Skipped: res.Claim.Skipped,
				Parked: res.Claim.Parked, Waiting: res.Claim.Waiting}
			first = false
		}
		n := min(it.claim, len(next))
		cr.Claimed, next = next[:n:n], next[n:]
		out[i].claimed = cr
	}
	if limit > 0 {
		c.claimedInBatch(now, res.Claim, took)
	}
	return out, nil
}

// claimedInBatch reports the claim made in a batch of writes as claim reports its
// own.
func (c *Client) claimedInBatch(now time.Time, res *store.ClaimResult, took time.Duration) {
	c.claimed(now, res)
	if res.Parked > 0 {
		c.log.Warn("steps sent to review when claimed: a key conflict, or an effect key that cannot be built; see the review queue",
			"steps", res.Parked)
	}
	if n := len(res.Claimed) + res.Reused + res.Skipped + res.Parked + res.Waiting; n > 0 {
		c.observeCommit(CommitClaims, n, took, nil)
	}
	if res.Reused > 0 || res.Skipped > 0 || res.Parked > 0 {
		c.poke() // what they completed or skipped may have released other steps
	}
}

// insertRun group-commits a start and returns its result.
func (c *Client) insertRun(ctx context.Context, p store.RunInsertParams) (store.RunInsertResult, error) {
	if !c.startsInWrites {
		return c.starts.Do(ctx, p)
	}
	res, err := c.writes.Do(ctx, writeItem{start: &p})
	return res.start, err
}

// insertRunLater group-commits a start without waiting for it: the audit event of a
// repeated start answered from a read. It is a store.RunInsertParams.Repeat: it never
// creates a run, so a run deleted after the read (a purge) is not started again by the
// repeat of a caller who was answered with it, or refused.
func (c *Client) insertRunLater(p store.RunInsertParams) {
	p.Repeat = true
	if !c.startsInWrites {
		c.starts.Go(p)
		return
	}
	c.writes.Go(writeItem{start: &p})
}

// recordStep group-commits an attempt's record: the result's err is the record's own
// result and, with chain, next the step its transaction claimed for the caller.
func (c *Client) recordStep(ctx context.Context, p store.StepRecordParams, chain bool) (writeResult, error) {
	if c.writes == nil {
		err, cerr := c.records.Do(ctx, p)
		return writeResult{err: err}, cerr
	}
	return c.writes.Do(ctx, writeItem{record: &p, chain: chain})
}

// claimSteps claims up to limit due steps for this client.
func (c *Client) claimSteps(ctx context.Context, limit int) (*store.ClaimResult, error) {
	res, err := c.writes.Do(ctx, writeItem{claim: limit})
	return res.claimed, err
}

// flushWrites waits for the writes committed in the background.
func (c *Client) flushWrites(ctx context.Context) error {
	if c.writes == nil {
		return nil
	}
	return c.writes.Flush(ctx)
}

package store

import "context"

// BatchWriter is implemented by stores that commit starts, records and a claim together,
// in one transaction instead of one per kind: a worker that finished a step goes on with
// another without a claim transaction of its own, and a database with one writer commits
// (and fsyncs) once per batch of everything. The engine uses it when the store offers it, and RunInsertMany,
// StepRecord and StepClaim otherwise.
type BatchWriter interface {
	// WriteBatch does, in one transaction and in this order, what RunInsertMany(p.Starts),
	// StepRecord(p.Records) and StepClaim(p.Claim) do, with the same per-item results,
	// events and compare-and-set rules. The claim sees what the starts and records wrote
	// (a step they made due may be claimed); a Claim.Limit of 0 claims nothing. err is for
	// a failure of the whole call: then nothing was committed.
	WriteBatch(ctx context.Context, p WriteBatchParams) (*WriteBatchResult, error)
	// OneWriter reports whether the database commits one write transaction at a time
	// (SQLite). Then starts join the batches too; otherwise they keep transactions of their
	// own, so that a start does not wait behind records and claims while the database
	// could commit both at once.
	OneWriter() bool
}

// WriteBatchParams are the arguments of WriteBatch.
type WriteBatchParams struct {
	Starts  []RunInsertParams
	Records []StepRecordParams
	Claim   StepClaimParams
}

// WriteBatchResult is what WriteBatch did: one result per start and per record, in order,
// and the claim's result (never nil).
type WriteBatchResult struct {
	Starts  []RunInsertResult
	Records []error
	Claim   *ClaimResult
}

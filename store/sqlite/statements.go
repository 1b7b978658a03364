package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// The statements of the write path, prepared once on the writer connection when the store
// opens and bound to each transaction with tx.StmtContext, so that SQLite parses each of them
// once per process instead of once per item. A list of IDs is passed as one JSON array and
// read with json_each, so that one prepared statement serves any number of IDs.

type stmtID int

const (
	stmtRunInsert stmtID = iota
	stmtRunByKey
	stmtRunStateSet
	stmtRunsByIDs
	stmtRunsOfSteps
	stmtStepsOfRuns
	stmtStepsOfRunsWithOutputs
	stmtClaimCandidates
	stmtEffectGet
	stmtEffectFingerprint
	stmtEffectComplete
	stmtEffectRelease
	stmtStepGet
	stmtStepPark
	stmtStepSkip
	stmtStepReuse
	stmtStepWait
	stmtStepTake
	stmtStepRelease
	stmtStepCancelDependents
	stmtStepSkipDependents
	stmtStepHeartbeat
	stmtReapCandidates
	stmtReapCancelled
	stmtStepReap
	stmtAttemptReap
	// Batched record statements: numRecordBatch IDs from stmtRecordBatch on, one per kind
	// of recordBatch and size in batchSizes (see recordBatchStmt). stmtRecordBatchLast is
	// the last of them; the constants below it repeat its expression (iota plus the
	// reserved IDs), so they follow on without naming this block.
	stmtRecordBatch
	stmtRecordBatchLast = iota + stmtID(numRecordBatch) - 2
	// Batched claim and start statements: the ledger rows and the runs of a list of keys,
	// the steps of a list a claim took, multi-row inserts of ledger rows (one statement per
	// size in bulkSizes), and the compare-and-set of the steps a claim takes and the insert
	// of runs for wideSizes.
	stmtEffectsByKeys
	stmtRunsByKeys
	stmtStepsTaken
	stmtEffectsTakeBulk
	stmtStepsTakeWide  = stmtEffectsTakeBulk + stmtID(len(bulkSizes))
	stmtRunsInsertWide = stmtStepsTakeWide + stmtID(len(wideSizes))
	// The multi-row inserts, one statement per size in bulkSizes.
	stmtEventsBulk   = stmtRunsInsertWide + stmtID(len(wideSizes))
	stmtStepsBulk    = stmtEventsBulk + stmtID(len(bulkSizes))
	stmtAttemptsBulk = stmtStepsBulk + stmtID(len(bulkSizes))
	numStmts         = stmtAttemptsBulk + stmtID(len(bulkSizes))
)

// bulkSizes are the row counts of the prepared multi-row inserts: n rows are written with
// at most one statement per size, largest first.
var bulkSizes = [...]int{128, 32, 8, 2, 1}

// recordBatch is a kind of batched record statement: one statement for many rows, given
// as a list of VALUES bound one value each (outputs stay BLOBs), joined to the table they
// change (for one row, the same statement without the list: recordBatchOne). A statement is
// prepared for each size in batchSizes; fewer rows are padded with rows of NULLs, which
// match nothing.
type recordBatch int

// The kinds of batched record statements.
const (
	// batchAttemptRecord closes the attempts recorded.
	batchAttemptRecord recordBatch = iota
	// batchStepRecord is the compare-and-set of the recorded steps; it returns the IDs of
	// those it applied to.
	batchStepRecord
	// batchEffectComplete completes the ledger rows the recorded steps hold.
	batchEffectComplete
	// batchEffectRelease deletes the ledger rows the recorded steps hold.
	batchEffectRelease
	// batchStepRelease decrements the waiting count of pending steps by n each.
	batchStepRelease
	numRecordKinds
)

// batchSizes are the row counts of the batched record statements: n rows are written with
// the smallest that holds them, by chunks of the largest.
var batchSizes = [...]int{1, 2, 4, 8, 16, 32, 64, 128}

const numRecordBatch = int(numRecordKinds) * len(batchSizes)

// recordBatchRows are the columns of each kind's VALUES list, in order.
var recordBatchRows = [numRecordKinds]string{
	batchAttemptRecord:  `step_id, number, worker, ended_at, outcome, error, response_status, response_excerpt`,
	batchStepRecord:     `id, owner, attempt, state, next_at, outcome, output, error, reason, updated_at`,
	batchEffectComplete: `effect_key, step_id, result, completed_at, retain_until`,
	batchEffectRelease:  `effect_key, step_id`,
	batchStepRelease:    `id, n, next_at, updated_at`,
}

// recordBatchWidth is the number of columns of each kind's VALUES list.
var recordBatchWidth = func() (n [numRecordKinds]int) {
	for kind, cols := range recordBatchRows {
		n[kind] = strings.Count(cols, ",") + 1
	}
	return n
}()

// recordBatchSQL is each kind's statement after its VALUES list, named v.
var recordBatchSQL = [numRecordKinds]string{
	// Only the caller's own attempt row: a record from another owner must not close the
	// attempt the lease holder is still running.
	batchAttemptRecord: `UPDATE attempts SET ended_at = v.ended_at, outcome = v.outcome, error = v.error,
			response_status = v.response_status, response_excerpt = v.response_excerpt
		FROM v WHERE attempts.step_id = v.step_id AND attempts.number = v.number AND attempts.worker = v.worker`,
	// The compare-and-set, for steps whose IDs are distinct.
	batchStepRecord: `UPDATE steps SET state = v.state, next_at = v.next_at, lease_owner = '', lease_expires_at = 0,
			last_outcome = v.outcome, output = coalesce(v.output, steps.output), last_error = v.error, reason = v.reason,
			updated_at = v.updated_at
		FROM v WHERE steps.id = v.id AND steps.lease_owner = v.owner AND steps.attempt = v.attempt AND steps.state = 'processing'
		RETURNING id`,
	// As stmtEffectComplete, for many rows.
	batchEffectComplete: `UPDATE effects SET state = 'completed', result = v.result, completed_at = v.completed_at,
			retain_until = v.retain_until
		FROM v WHERE effects.effect_key = v.effect_key AND effects.step_id = v.step_id AND effects.state = 'in_flight'`,
	// As stmtEffectRelease, for many rows.
	batchEffectRelease: `DELETE FROM effects WHERE rowid IN (SELECT e.rowid FROM v
			JOIN effects e ON e.effect_key = v.effect_key AND e.step_id = v.step_id WHERE e.state = 'in_flight')`,
	// As n times stmtStepRelease: the next due time is the latest of them, the update time
	// the last.
	batchStepRelease: `UPDATE steps SET waiting = steps.waiting - v.n, next_at = max(steps.next_at, v.next_at), updated_at = v.updated_at
		FROM v WHERE steps.id = v.id AND steps.state = 'pending' AND steps.waiting >= v.n`,
}

// recordBatchOne is each kind's statement for one row, without a VALUES list to read: its
// parameters are numbered in the order of the row's columns.
var recordBatchOne = [numRecordKinds]string{
	batchAttemptRecord: `UPDATE attempts SET ended_at = ?4, outcome = ?5, error = ?6, response_status = ?7, response_excerpt = ?8
		WHERE step_id = ?1 AND number = ?2 AND worker = ?3`,
	batchStepRecord: `UPDATE steps SET state = ?4, next_at = ?5, lease_owner = '', lease_expires_at = 0, last_outcome = ?6,
			output = coalesce(?7, output), last_error = ?8, reason = ?9, updated_at = ?10
		WHERE id = ?1 AND lease_owner = ?2 AND attempt = ?3 AND state = 'processing'
		RETURNING id`,
	batchEffectComplete: `UPDATE effects SET state = 'completed', result = ?3, completed_at = ?4, retain_until = ?5
		WHERE effect_key = ?1 AND step_id = ?2 AND state = 'in_flight'`,
	batchEffectRelease: `DELETE FROM effects WHERE effect_key = ?1 AND step_id = ?2 AND state = 'in_flight'`,
	batchStepRelease: `UPDATE steps SET waiting = waiting - ?2, next_at = max(next_at, ?3), updated_at = ?4
		WHERE id = ?1 AND state = 'pending' AND waiting >= ?2`,
}

// recordBatchStmt is the statement of kind for batchSizes[size].
func recordBatchStmt(kind recordBatch, size int) stmtID {
	return stmtRecordBatch + stmtID(int(kind)*len(batchSizes)+size)
}

// wideSizes are the row counts of the multi-row statements that cost more than as many
// single-row ones below some rows (an UPDATE … FROM, an INSERT … RETURNING): the rows
// that remain are written one by one.
var wideSizes = [...]int{128, 32}

const (
	eventColumns = `at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail`
	eventRow     = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	eventArgs    = 12

	stepInsertColumns = `run_id, workflow, name, needs, waiting, state, next_at, created_at, updated_at`
	stepInsertRow     = `(?, ?, ?, ?, ?, 'pending', ?, ?, ?)`
	stepInsertArgs    = 8

	attemptInsertColumns = `run_id, step_id, step_name, number, effect_key, worker, started_at`
	attemptInsertRow     = `(?, ?, ?, ?, ?, ?, ?)`
	attemptInsertArgs    = 7

	// propagateSQL moves, in one round, the pending steps of a run that need a step in
	// one of the states of a list to another state (%s: that list).
	propagateSQL = `UPDATE steps SET state = ?, reason = ?, updated_at = ?
		WHERE run_id = ? AND state = 'pending' AND EXISTS (
			SELECT 1 FROM json_each(steps.needs) j JOIN steps d ON d.run_id = steps.run_id AND d.name = j.value
			WHERE d.state IN (%s))
		RETURNING id, name, attempt`

	effectColumns = `effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until`

	// The ledger rows a claim takes. Without RETURNING, which costs more than it saves:
	// the count of rows inserted says whether every key was new.
	effectTakeColumns = `effect_key, state, fingerprint, run_id, step_id, workflow, step_name, created_at`
	effectTakeRow     = `(?, 'in_flight', ?, ?, ?, ?, ?, ?)`
	effectTakeArgs    = 7

	// The compare-and-set of the steps a claim takes, as stmtStepTake for many: a row of v
	// per step (id, new attempt, effect key, fingerprint, lease expiry, attempt expected),
	// followed by the owner and the time. Without RETURNING: the count of rows changed
	// says whether every step was taken, and stmtStepsTaken says which when one was not.
	stepTakeRow  = `(?, ?, ?, ?, ?, ?)`
	stepTakeArgs = 6
	stepTakeSQL  = `WITH v (id, attempt, effect_key, fingerprint, lease_expires_at, prev_attempt) AS (VALUES %s)
		UPDATE steps SET state = 'processing', attempt = v.attempt, effect_key = v.effect_key, fingerprint = v.fingerprint,
			lease_owner = ?, lease_expires_at = v.lease_expires_at, reason = '', updated_at = ?
		FROM v WHERE steps.id = v.id AND steps.state IN ('pending', 'retrying') AND steps.attempt = v.prev_attempt`

	runInsertColumns = `workflow, run_key, entity, input, input_hash, state, created_at, updated_at`
	runInsertRow     = `(?, ?, ?, ?, ?, 'pending', ?, ?)`
	runInsertArgs    = 7
)

var stmtSQL = func() [numStmts]string {
	q := [numStmts]string{
		stmtRunInsert: `INSERT INTO runs (workflow, run_key, entity, input, input_hash, state, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, 'pending', ?, ?) ON CONFLICT (workflow, run_key) DO NOTHING`,
		stmtRunByKey:    `SELECT ` + runColumns + ` FROM runs r WHERE r.workflow = ? AND r.run_key = ?`,
		stmtRunStateSet: `UPDATE runs SET state = ?, updated_at = ? WHERE id = ?`,
		stmtRunsByIDs:   `SELECT r.id, r.workflow, r.entity, r.state FROM runs r WHERE r.id IN (SELECT value FROM json_each(?))`,
		stmtRunsOfSteps: `SELECT r.id, r.workflow, r.entity, r.state FROM runs r
			WHERE r.id IN (SELECT s.run_id FROM steps s WHERE s.id IN (SELECT value FROM json_each(?)))`,
		stmtStepsOfRuns: `SELECT s.id, s.run_id, s.name, s.needs, s.state, s.waiting, s.effect_key, NULL, s.reason = 'delayed' FROM steps s
			WHERE s.run_id IN (SELECT value FROM json_each(?))`,
		stmtStepsOfRunsWithOutputs: `SELECT s.id, s.run_id, s.name, s.needs, s.state, s.waiting, s.effect_key, CASE WHEN s.state = 'completed' THEN s.output END,
			s.reason = 'delayed'
			FROM steps s WHERE s.run_id IN (SELECT value FROM json_each(?))`,
		stmtClaimCandidates: `SELECT ` + stepColumns + `, ` + runColumns + `
			FROM steps s JOIN runs r ON r.id = s.run_id
			WHERE s.state IN ('pending', 'retrying') AND s.waiting = 0 AND s.next_at <= ?
			  AND s.workflow IN (SELECT value FROM json_each(?))
			ORDER BY s.next_at, s.id LIMIT ?`,
		stmtEffectGet:         `SELECT ` + effectColumns + ` FROM effects WHERE effect_key = ?`,
		stmtEffectFingerprint: `UPDATE effects SET fingerprint = ? WHERE effect_key = ?`,
		stmtEffectComplete: `UPDATE effects SET state = 'completed', result = ?, completed_at = ?, retain_until = ?
			WHERE effect_key = ? AND step_id = ? AND state = 'in_flight'`,
		stmtEffectRelease: `DELETE FROM effects WHERE effect_key = ? AND step_id = ? AND state = 'in_flight'`,
		stmtStepGet:       `SELECT ` + stepColumns + ` FROM steps s WHERE s.id = ?`,
		stmtStepPark: `UPDATE steps SET state = 'needs_review', effect_key = ?, fingerprint = ?, reason = ?, last_error = ?,
			lease_owner = '', lease_expires_at = 0, updated_at = ? WHERE id = ?`,
		stmtStepSkip: `UPDATE steps SET state = 'skipped', reason = ?, updated_at = ? WHERE id = ?`,
		stmtStepReuse: `UPDATE steps SET state = 'completed', effect_key = ?, fingerprint = ?, output = ?, reason = 'effect_reused',
			lease_owner = '', lease_expires_at = 0, updated_at = ? WHERE id = ?`,
		stmtStepWait: `UPDATE steps SET next_at = ?, effect_key = ?, fingerprint = ?, reason = ?, updated_at = ? WHERE id = ?`,
		stmtStepTake: `UPDATE steps SET state = 'processing', attempt = ?, effect_key = ?, fingerprint = ?, lease_owner = ?, lease_expires_at = ?,
			reason = '', updated_at = ? WHERE id = ? AND state IN ('pending', 'retrying') AND attempt = ?`,
		stmtStepRelease: `UPDATE steps SET waiting = waiting - 1, next_at = max(next_at, ?), updated_at = ?
			WHERE id IN (SELECT value FROM json_each(?)) AND state = 'pending' AND waiting > 0`,
		stmtStepCancelDependents: fmt.Sprintf(propagateSQL, `'failed', 'cancelled'`),
		stmtStepSkipDependents:   fmt.Sprintf(propagateSQL, `'skipped'`),
		stmtStepHeartbeat: `UPDATE steps SET lease_expires_at = ?, updated_at = ?
			WHERE lease_owner = ? AND state IN ('processing', 'cancelled') AND id IN (SELECT value FROM json_each(?)) RETURNING id`,
		// Steps cancelled while their attempt ran, whose worker vanished.
		stmtReapCancelled: `SELECT ` + stepColumns + `, ` + runColumns + `
			FROM steps s JOIN runs r ON r.id = s.run_id
			WHERE s.state = 'cancelled' AND s.lease_owner <> '' AND s.lease_expires_at < ? ORDER BY s.lease_expires_at LIMIT ?`,
		stmtReapCandidates: `SELECT ` + stepColumns + `, ` + runColumns + `
			FROM steps s JOIN runs r ON r.id = s.run_id
			WHERE s.state = 'processing' AND s.lease_expires_at < ? ORDER BY s.lease_expires_at LIMIT ?`,
		stmtStepReap: `UPDATE steps SET state = ?, next_at = ?, lease_owner = '', lease_expires_at = 0, last_outcome = 'unknown',
			last_error = ?, reason = ?, updated_at = ? WHERE id = ? AND state IN ('processing', 'cancelled') AND lease_owner = ? AND attempt = ?`,
		stmtAttemptReap:   `UPDATE attempts SET ended_at = ?, outcome = 'unknown', error = ? WHERE step_id = ? AND number = ? AND ended_at = 0`,
		stmtEffectsByKeys: `SELECT ` + effectColumns + ` FROM effects WHERE effect_key IN (SELECT value FROM json_each(?))`,
		// The steps of a list (JSON) processing under an owner since a time, with their
		// attempt and lease: those a claim took.
		stmtStepsTaken: `SELECT s.id, s.attempt, s.lease_expires_at FROM steps s
			WHERE s.id IN (SELECT value FROM json_each(?)) AND s.state = 'processing' AND s.lease_owner = ? AND s.updated_at = ?`,
		// A JSON array of [workflow, run key] pairs.
		stmtRunsByKeys: `SELECT ` + runColumns + ` FROM runs r
			WHERE (r.workflow, r.run_key) IN (SELECT value ->> 0, value ->> 1 FROM json_each(?))`,
	}
	for kind := range numRecordKinds {
		row := "(" + rowsOf("?", recordBatchWidth[kind]) + ")"
		for i, n := range batchSizes {
			q[recordBatchStmt(kind, i)] = `WITH v (` + recordBatchRows[kind] + `) AS (VALUES ` + rowsOf(row, n) + `) ` + recordBatchSQL[kind]
			if n == 1 {
				q[recordBatchStmt(kind, i)] = recordBatchOne[kind]
			}
		}
	}
	for i, n := range bulkSizes {
		q[stmtEventsBulk+stmtID(i)] = `INSERT INTO events (` + eventColumns + `) VALUES ` + rowsOf(eventRow, n)
		q[stmtStepsBulk+stmtID(i)] = `INSERT INTO steps (` + stepInsertColumns + `) VALUES ` + rowsOf(stepInsertRow, n)
		q[stmtAttemptsBulk+stmtID(i)] = `INSERT INTO attempts (` + attemptInsertColumns + `) VALUES ` + rowsOf(attemptInsertRow, n)
		q[stmtEffectsTakeBulk+stmtID(i)] = `INSERT INTO effects (` + effectTakeColumns + `) VALUES ` + rowsOf(effectTakeRow, n) +
			` ON CONFLICT (effect_key) DO NOTHING`
	}
	for i, n := range wideSizes {
		q[stmtStepsTakeWide+stmtID(i)] = fmt.Sprintf(stepTakeSQL, rowsOf(stepTakeRow, n))
		q[stmtRunsInsertWide+stmtID(i)] = `INSERT INTO runs (` + runInsertColumns + `) VALUES ` + rowsOf(runInsertRow, n) +
			` ON CONFLICT (workflow, run_key) DO NOTHING RETURNING id, workflow, run_key`
	}
	return q
}()

func rowsOf(row string, n int) string {
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}

// statements are the prepared statements of a store.
type statements [numStmts]*sql.Stmt

// prepare prepares every statement of the write path on db.
func prepare(ctx context.Context, db *sql.DB) (*statements, error) {
	var st statements
	for i, q := range stmtSQL {
		p, err := db.PrepareContext(ctx, q)
		if err != nil {
			st.close()
			return nil, fmt.Errorf("prepare %q: %w", q, err)
		}
		st[i] = p
	}
	return &st, nil
}

func (st *statements) close() error {
	var errs []error
	for _, p := range st {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	return errors.Join(errs...)
}

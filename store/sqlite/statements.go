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
	stmtEffectInsert
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
	stmtStepRecord
	stmtAttemptRecord
	stmtStepHeartbeat
	stmtStepCheckpoint
	stmtReapCandidates
	stmtReapCancelled
	stmtStepReap
	stmtAttemptReap
	// The multi-row inserts, one statement per size in bulkSizes.
	stmtEventsBulk
	stmtStepsBulk    = stmtEventsBulk + stmtID(len(bulkSizes))
	stmtAttemptsBulk = stmtStepsBulk + stmtID(len(bulkSizes))
	numStmts         = stmtAttemptsBulk + stmtID(len(bulkSizes))
)

// bulkSizes are the row counts of the prepared multi-row inserts: n rows are written with
// at most one statement per size, largest first.
var bulkSizes = [...]int{128, 32, 8, 2, 1}

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
		stmtEffectInsert: `INSERT INTO effects (effect_key, state, fingerprint, run_id, step_id, workflow, step_name, created_at)
			VALUES (?, 'in_flight', ?, ?, ?, ?, ?, ?) ON CONFLICT (effect_key) DO NOTHING`,
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
		stmtStepRecord: `UPDATE steps SET state = ?, next_at = ?, lease_owner = '', lease_expires_at = 0, last_outcome = ?,
			output = coalesce(?, output), last_error = ?, reason = ?, updated_at = ?
			WHERE id = ? AND lease_owner = ? AND attempt = ? AND state = 'processing'`,
		// Only the caller's own attempt row: a record from another owner must not close the
		// attempt the lease holder is still running.
		stmtAttemptRecord: `UPDATE attempts SET ended_at = ?, outcome = ?, error = ?, response_status = ?, response_excerpt = ?
			WHERE step_id = ? AND number = ? AND worker = ?`,
		stmtStepCheckpoint: `UPDATE steps SET progress = ?, updated_at = ?
			WHERE id = ? AND lease_owner = ? AND attempt = ? AND state = 'processing'`,
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
		stmtAttemptReap: `UPDATE attempts SET ended_at = ?, outcome = 'unknown', error = ? WHERE step_id = ? AND number = ? AND ended_at = 0`,
	}
	for i, n := range bulkSizes {
		q[stmtEventsBulk+stmtID(i)] = `INSERT INTO events (` + eventColumns + `) VALUES ` + rowsOf(eventRow, n)
		q[stmtStepsBulk+stmtID(i)] = `INSERT INTO steps (` + stepInsertColumns + `) VALUES ` + rowsOf(stepInsertRow, n)
		q[stmtAttemptsBulk+stmtID(i)] = `INSERT INTO attempts (` + attemptInsertColumns + `) VALUES ` + rowsOf(attemptInsertRow, n)
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

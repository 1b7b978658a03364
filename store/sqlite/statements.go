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
	stmtRunsByIDs
	stmtRunsOfSteps
	stmtStepsOfRuns
	stmtStepsOfRunsWithOutputs
	stmtStepFacts
	stmtClaimCandidates
	stmtEffectComplete
	stmtEffectRelease
	stmtStepGet
	stmtStepPark
	stmtStepSkip
	stmtStepReuse
	stmtStepWait
	stmtStepTake
	stmtStepTakeFree
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
	stmtSpanInsert
	stmtStepKeyUsed
	stmtStepCancelledRecord
	stmtKeyHolder
	stmtKeyRetire
	stmtKeyRelease
	stmtKeyReleaseInFlight
	stmtKeyKeep
	stmtStepRecordComplete
	stmtStepRecordRelease
	stmtRunCountsAdd
	stmtRunStatesSet
	// The multi-row inserts, one statement per size in bulkSizes.
	stmtEventsBulk
	stmtStepsBulk    = stmtEventsBulk + stmtID(len(bulkSizes))
	stmtAttemptsBulk = stmtStepsBulk + stmtID(len(bulkSizes))
	numStmts         = stmtAttemptsBulk + stmtID(len(bulkSizes))
)

// keepsReleases are the statements that may run while releases wait to be written
// (writeTx.release): they change rows no release changes and read none a release changes.
// Before any other statement the releases are written.
var keepsReleases = func() (k [numStmts]bool) {
	for _, id := range []stmtID{stmtRunInsert, stmtStepRecord, stmtStepRecordComplete, stmtStepRecordRelease, stmtAttemptRecord,
		stmtEffectComplete, stmtEffectRelease, stmtStepTake, stmtStepTakeFree, stmtRunStatesSet, stmtRunCountsAdd, stmtSpanInsert} {
		k[id] = true
	}
	for i := range bulkSizes {
		k[stmtEventsBulk+stmtID(i)], k[stmtStepsBulk+stmtID(i)], k[stmtAttemptsBulk+stmtID(i)] = true, true, true
	}
	return k
}()

// bulkSizes are the row counts of the prepared multi-row inserts: n rows are written with
// at most one statement per size, largest first.
var bulkSizes = [...]int{128, 32, 8, 2, 1}

const (
	eventColumns = `id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail`
	eventRow     = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	eventArgs    = 13

	stepInsertColumns = `run_id, workflow, name, needs, waiting, state, next_at, created_at, updated_at`
	stepInsertRow     = `(?, ?, ?, ?, ?, 'pending', ?, ?, ?)`
	stepInsertArgs    = 8

	attemptInsertColumns = `id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status,
		response_excerpt, claim_event_id, lease_until, prev_outcome, claim_run_event_id, claim_run_change, end_derived, end_reason, end_actor,
		end_run_event_id, end_run_change, request`
	attemptInsertRow = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

	// propagateSQL moves, in one round, the pending steps of a run that need a step in
	// one of the states of a list to another state (%s: that list).
	propagateSQL = `UPDATE steps SET state = ?, reason = ?, updated_at = ?
		WHERE run_id = ? AND state = 'pending' AND EXISTS (
			SELECT 1 FROM json_each(steps.needs) j JOIN steps d ON d.run_id = steps.run_id AND d.name = j.value
			WHERE d.state IN (%s))
		RETURNING id, name, attempt`

	// stepRecordSet and stepRecordWhere are a record's compare-and-set on its step (?1
	// state, ?2 next_at, ?3 outcome, ?4 output, ?5 error, ?6 reason, ?7 now, ?8 id, ?9
	// owner, ?10 attempt).
	stepRecordSet = `state = ?1, next_at = ?2, lease_owner = '', lease_expires_at = 0, last_outcome = ?3, output = coalesce(?4, output),
		last_error = ?5, reason = ?6, updated_at = ?7,` + claimCleared
	stepRecordWhere = `id = ?8 AND lease_owner = ?9 AND attempt = ?10 AND state = 'processing'`

	// keySlot sets the key_slot of a step given the key ?1: its own ID, unless it keeps
	// its key (then its slot stays: 0 for the holder, NULL before migration 0012).
	keySlot = `key_slot = CASE WHEN effect_key = ?1 THEN key_slot ELSE id END`

	// factColumns are the facts of steps s stepStatus.setFacts reads.
	factColumns = `s.attempt, s.lease_owner, ` + claimColumns + `, ` + ledgerColumns

	// claimCleared ends the claim facts of a step whose attempt ended.
	claimCleared = ` claim_event_id = NULL, claimed_at = 0, claim_lease_until = 0, claim_prev_outcome = '', claim_run_event_id = NULL,
		claim_run_change = ''`

	// stepTakeSQL is the take of a step (stmtStepTake).
	stepTakeSQL = `UPDATE steps SET state = 'processing', attempt = ?1, effect_key = ?2, fingerprint = ?3, lease_owner = ?4, lease_expires_at = ?5,
			reason = '', updated_at = ?6, claim_event_id = ?7, claimed_at = ?6, claim_lease_until = ?8, claim_prev_outcome = ?9,
			claim_run_event_id = ?10, claim_run_change = ?11, key_slot = 0, key_state = 'in_flight', key_taken_at = ?14
			WHERE id = ?12 AND state IN ('pending', 'retrying') AND attempt = ?13`

	effectColumns = `effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until`
)

var stmtSQL = func() [numStmts]string {
	q := [numStmts]string{
		// A new run derives its run.created event.
		stmtRunInsert: `INSERT INTO runs (workflow, run_key, entity, input, input_hash, state, created_at, updated_at, created_by, created_steps, created_event_id)
			VALUES (?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?) ON CONFLICT (workflow, run_key) DO NOTHING`,
		stmtRunByKey: `SELECT ` + runColumns + ` FROM runs r WHERE r.workflow = ? AND r.run_key = ?`,
		// The changes of run_counts a transaction made, as [workflow, state, delta] rows.
		stmtRunCountsAdd: `INSERT INTO run_counts (workflow, state, n)
			SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(?) WHERE true
			ON CONFLICT (workflow, state) DO UPDATE SET n = n + excluded.n`,
		// The states of runs a transaction changed, as [id, state, updated_at] rows.
		stmtRunStatesSet: `UPDATE runs SET state = u.value ->> 1, updated_at = u.value ->> 2
			FROM json_each(?) AS u WHERE runs.id = u.value ->> 0`,
		stmtRunsByIDs: `SELECT r.id, r.workflow, r.entity, r.state FROM runs r WHERE r.id IN (SELECT value FROM json_each(?))`,
		stmtRunsOfSteps: `SELECT r.id, r.workflow, r.entity, r.state FROM runs r
			WHERE r.id IN (SELECT s.run_id FROM steps s WHERE s.id IN (SELECT value FROM json_each(?)))`,
		stmtStepsOfRuns: `SELECT s.id, s.run_id, s.name, s.needs, s.state, s.waiting, s.effect_key, NULL, s.reason = 'delayed' FROM steps s
			WHERE s.run_id IN (SELECT value FROM json_each(?))`,
		stmtStepsOfRunsWithOutputs: `SELECT s.id, s.run_id, s.name, s.needs, s.state, s.waiting, s.effect_key, CASE WHEN s.state = 'completed' THEN s.output END,
			s.reason = 'delayed'
			FROM steps s WHERE s.run_id IN (SELECT value FROM json_each(?))`,
		// What a record or a claim of a step needs besides its status: its attempt and lease
		// owner, the claim in flight and what it holds of the ledger.
		stmtStepFacts: `SELECT s.id, ` + factColumns + ` FROM steps s WHERE s.id IN (SELECT value FROM json_each(?))`,
		stmtClaimCandidates: `SELECT ` + stepColumns + `, ` + runColumns + `, ` + factColumns + `
			FROM steps s JOIN runs r ON r.id = s.run_id
			WHERE s.state IN ('pending', 'retrying') AND s.waiting = 0 AND s.next_at <= ?
			  AND s.workflow IN (SELECT value FROM json_each(?))
			ORDER BY s.next_at, s.id`,
		stmtEffectComplete: `UPDATE effects SET state = 'completed', result = ?, completed_at = ?, retain_until = ?
			WHERE effect_key = ? AND step_id = ? AND state = 'in_flight'`,
		stmtEffectRelease: `DELETE FROM effects WHERE effect_key = ? AND step_id = ? AND state = 'in_flight'`,
		stmtStepGet:       `SELECT ` + stepColumns + `, ` + claimColumns + `, ` + ledgerColumns + ` FROM steps s WHERE s.id = ?`,
		// A step given a key it does not hold has its own ID as key_slot; one that keeps its
		// key keeps its slot.
		stmtStepPark: `UPDATE steps SET state = 'needs_review', effect_key = ?1, fingerprint = ?2, reason = ?3, last_error = ?4,
			lease_owner = '', lease_expires_at = 0, updated_at = ?5, ` + keySlot + ` WHERE id = ?6`,
		stmtStepSkip: `UPDATE steps SET state = 'skipped', reason = ?, updated_at = ? WHERE id = ?`,
		stmtStepReuse: `UPDATE steps SET state = 'completed', effect_key = ?1, fingerprint = ?2, output = ?3, reason = 'effect_reused',
			lease_owner = '', lease_expires_at = 0, updated_at = ?4, ` + keySlot + ` WHERE id = ?5`,
		stmtStepWait: `UPDATE steps SET next_at = ?1, effect_key = ?2, fingerprint = ?3, reason = ?4, updated_at = ?5, ` +
			strings.ReplaceAll(keySlot, "?1", "?2") + ` WHERE id = ?6`,
		// The claim's facts, from which its step.claimed event (and the run's state change,
		// if any) are derived, stay in the row until the attempt ends.
		stmtStepTake: stepTakeSQL,
		// The take of a key no step holds (the unique index steps_key refuses a second
		// holder) and effects does not keep.
		stmtStepTakeFree: stepTakeSQL + ` AND NOT EXISTS (SELECT 1 FROM effects WHERE effect_key = ?2)`,
		// The releases a transaction made, as [id, releases, latest due time, last time]
		// rows (writeTx.release).
		stmtStepRelease: `UPDATE steps SET waiting = waiting - (u.value ->> 1), next_at = max(next_at, u.value ->> 2),
			updated_at = u.value ->> 3
			FROM json_each(?) AS u WHERE steps.id = u.value ->> 0 AND steps.state = 'pending' AND steps.waiting >= u.value ->> 1`,
		stmtStepCancelDependents: fmt.Sprintf(propagateSQL, `'failed', 'cancelled'`),
		stmtStepSkipDependents:   fmt.Sprintf(propagateSQL, `'skipped'`),
		stmtStepRecord:           `UPDATE steps SET ` + stepRecordSet + ` WHERE ` + stepRecordWhere,
		// A record that completes the key the step holds, or releases it.
		stmtStepRecordComplete: `UPDATE steps SET ` + stepRecordSet + `, key_state = 'completed', key_completed_at = ?7, key_retain_until = ?11
			WHERE ` + stepRecordWhere,
		stmtStepRecordRelease: `UPDATE steps SET ` + stepRecordSet + `, key_slot = id, key_state = '', key_retain_until = 0 WHERE ` + stepRecordWhere,
		stmtKeyHolder:         keyHolderSQL,
		// The key a step holds, into effects, as it stands.
		stmtKeyRetire: `INSERT INTO effects (` + effectColumns + `)
			SELECT effect_key, key_state, fingerprint, CASE WHEN key_state = 'completed' THEN coalesce(key_result, output) END, run_id, id, workflow, name,
				key_taken_at, key_completed_at, key_retain_until
			FROM steps WHERE id = ? AND key_slot = 0 AND effect_key <> ''`,
		stmtKeyRelease:         `UPDATE steps SET key_slot = id, key_state = '', key_retain_until = 0 WHERE id = ? AND key_slot = 0`,
		stmtKeyReleaseInFlight: `UPDATE steps SET key_slot = id, key_state = '', key_retain_until = 0 WHERE id = ? AND key_slot = 0 AND key_state = 'in_flight'`,
		// A success kept in the ledger although its step is not completed.
		stmtKeyKeep: `UPDATE steps SET key_state = 'completed', key_result = ?, key_completed_at = ?, key_retain_until = ?
			WHERE id = ? AND key_slot = 0 AND key_state = 'in_flight'`,
		// Only the caller's own attempt row: a record from another owner must not close the
		// attempt the lease holder is still running. A row that derives its completion is
		// final.
		stmtAttemptRecord: `UPDATE attempts SET ended_at = ?, outcome = ?, error = ?, response_status = ?, response_excerpt = ?, request = ?
			WHERE step_id = ? AND number = ? AND worker = ? AND end_derived = 0`,
		// A step cancelled while its attempt ran keeps what the attempt ended with, and its
		// lease ends.
		stmtStepCancelledRecord: `UPDATE steps SET lease_owner = '', lease_expires_at = 0, last_outcome = ?, last_error = ?, reason = ?, updated_at = ?,` +
			claimCleared + ` WHERE id = ? AND state = 'cancelled' AND lease_owner = ? AND attempt = ?`,
		stmtStepKeyUsed: `INSERT OR IGNORE INTO step_keys_used (effect_key, step_id) VALUES (?, ?)`,
		stmtStepCheckpoint: `UPDATE steps SET progress = ?, updated_at = ?
			WHERE id = ? AND lease_owner = ? AND attempt = ? AND state = 'processing'`,
		stmtStepHeartbeat: `UPDATE steps SET lease_expires_at = ?, updated_at = ?
			WHERE lease_owner = ? AND state IN ('processing', 'cancelled') AND id IN (SELECT value FROM json_each(?)) RETURNING id`,
		// Steps cancelled while their attempt ran, whose worker vanished. Both walk the
		// attempts in flight (steps_inflight), as few as the workers.
		stmtReapCancelled: `SELECT ` + stepColumns + `, ` + runColumns + `, ` + claimColumns + `
			FROM steps s JOIN runs r ON r.id = s.run_id
			WHERE s.claim_event_id IS NOT NULL AND s.state = 'cancelled' AND s.lease_owner <> '' AND s.lease_expires_at < ?
			ORDER BY s.lease_expires_at, s.id LIMIT ?`,
		stmtReapCandidates: `SELECT ` + stepColumns + `, ` + runColumns + `, ` + claimColumns + `
			FROM steps s JOIN runs r ON r.id = s.run_id
			WHERE s.claim_event_id IS NOT NULL AND s.state = 'processing' AND s.lease_expires_at < ?
			ORDER BY s.lease_expires_at, s.id LIMIT ?`,
		stmtStepReap: `UPDATE steps SET state = ?, next_at = ?, lease_owner = '', lease_expires_at = 0, last_outcome = 'unknown',
			last_error = ?, reason = ?, updated_at = ?,` + claimCleared + `
			WHERE id = ? AND state IN ('processing', 'cancelled') AND lease_owner = ? AND attempt = ?`,
		stmtAttemptReap: `UPDATE attempts SET ended_at = ?, outcome = 'unknown', error = ? WHERE step_id = ? AND number = ? AND ended_at = 0`,
		stmtSpanInsert:  `INSERT INTO audit_spans (first_id, last_id, min_at, max_at) VALUES (?, ?, ?, ?)`,
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

// prepare prepares every statement of the write path on the write connection c.
func prepare(ctx context.Context, db *sql.Conn) (*statements, error) {
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

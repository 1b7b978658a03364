package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/onceflow/onceflow/store"
)

// The effect ledger lives in the step row (migration 0014): the step that holds an effect
// key has key_slot 0 and the key's state, times and result; at most one step holds a key
// (the unique index steps_key). effects keeps the keys no step holds: those written before
// the migration (the steps they belong to have key_slot NULL and keep using effects), and
// those retired when their step was purged or given another key. A key is free when no
// step holds it and effects has no row for it.
//
// A transaction that may give a key a holder — a claim taking it, a person resolving a
// step by hand — first takes an advisory lock on the key (keyLocksSQL), then reads the
// key's ledger row with a statement of its own, whose snapshot sees every commit before
// the lock was granted: two transactions never both find a key free. Releasing or
// completing a key its step holds changes no holder and takes no lock.

// keyFacts is what a step row holds of the ledger.
type keyFacts struct {
	// slot is 0 when the step holds its effect key, -1 for a step written before the
	// migration (its ledger row is in effects), its own ID otherwise.
	slot        int64
	state       string
	takenAt     time.Time
	completedAt time.Time
	retainUntil time.Time
	result      []byte
}

// ledgerColumns are the ledger facts of steps s, as keyScan reads them.
const ledgerColumns = `coalesce(s.key_slot, -1), s.key_state, s.key_taken_at, s.key_completed_at, s.key_retain_until, s.key_result`

// keyScan holds the scan destinations of ledgerColumns.
type keyScan struct {
	k                        keyFacts
	taken, completed, retain pgtype.Timestamptz
}

func (ks *keyScan) dest() []any {
	return []any{&ks.k.slot, &ks.k.state, &ks.taken, &ks.completed, &ks.retain, &ks.k.result}
}

func (ks *keyScan) facts() keyFacts {
	k := ks.k
	k.takenAt, k.completedAt, k.retainUntil = fromTS(ks.taken), fromTS(ks.completed), fromTS(ks.retain)
	return k
}

// holds reports whether the step holds its effect key in its row.
func (k *keyFacts) holds() bool { return k.slot == 0 }

// legacy reports whether the step's ledger row, if any, is in effects.
func (k *keyFacts) legacy() bool { return k.slot < 0 }

// holdsInFlight reports whether the step holds its key in flight.
func (k *keyFacts) holdsInFlight() bool { return k.holds() && k.state == string(store.EffectInFlight) }

// keyHoldersSQL are the ledger rows of the keys $1: whether a step holds it, then
// effectColumns: the steps that hold them, and the rows of effects.
const keyHoldersSQL = `SELECT true, s.effect_key, s.key_state, s.fingerprint, CASE WHEN s.key_state = 'completed' THEN coalesce(s.key_result, s.output) END,
		s.run_id, s.id, s.workflow, s.name, coalesce(s.key_taken_at, s.updated_at), s.key_completed_at, s.key_retain_until
	FROM steps s WHERE s.effect_key = ANY($1) AND s.effect_key <> '' AND s.key_slot = 0
	UNION ALL
	SELECT false, ` + effectColumns + ` FROM effects WHERE effect_key = ANY($1)`

// keyLocksSQL takes the advisory locks of the keys $1 (seeded with $2, this schema's), in
// one order, so that two transactions locking several keys never wait in a cycle.
const keyLocksSQL = `SELECT pg_advisory_xact_lock(h)
	FROM (SELECT DISTINCT hashtextextended(k, $2) AS h FROM unnest($1::text[]) AS k ORDER BY h) AS x`

// retireSQL moves the keys the steps $1 hold into effects, as they stand (in flight or
// completed, with their result and retention), and ends their holding: the steps go, or
// are given another key.
const retireSQL = `WITH held AS (
		UPDATE steps s SET key_slot = s.id, key_state = '', key_retain_until = NULL
		FROM steps o WHERE s.id = ANY($1) AND o.id = s.id AND s.key_slot = 0 AND s.effect_key <> ''
		RETURNING o.*)
	INSERT INTO effects (` + effectColumns + `)
	SELECT effect_key, key_state, fingerprint, CASE WHEN key_state = 'completed' THEN coalesce(key_result, output) END, run_id, id, workflow, name,
		coalesce(key_taken_at, updated_at), key_completed_at, key_retain_until
	FROM held`

// lockKeys adds the locks of keys to b.
func (t *txn) lockKeys(b *pgx.Batch, keys []string) {
	b.Queue(keyLocksSQL, keys, int64(t.s.eventMarkKey))
}

// heldKey is a key's ledger row and whether a step row holds it (else it is in effects).
type heldKey struct {
	*store.Effect
	inStep bool
}

// keyHolders locks keys and returns their ledger rows by key.
func keyHolders(ctx context.Context, t *txn, keys []string) (map[string]heldKey, error) {
	b := &pgx.Batch{}
	t.lockKeys(b, keys)
	b.Queue(keyHoldersSQL, keys)
	effs := make(map[string]heldKey, len(keys))
	err := sendQuery(ctx, t, b, func(rows pgx.Rows) error {
		_, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
			var h heldKey
			var err error
			h.Effect, err = scanEffect(row, &h.inStep)
			if err == nil {
				effs[h.Key] = h
			}
			return struct{}{}, err
		})
		return err
	})
	return effs, err
}

// keyHolder reads the ledger row of key, locking it if lock: nil for a free key.
func keyHolder(ctx context.Context, t *txn, key string, lock bool) (heldKey, error) {
	if lock {
		hs, err := keyHolders(ctx, t, []string{key})
		return hs[key], err
	}
	var h heldKey
	rows, err := t.Query(ctx, keyHoldersSQL, []string{key})
	if err != nil {
		return h, err
	}
	_, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (struct{}, error) {
		var err error
		h.Effect, err = scanEffect(row, &h.inStep)
		return struct{}{}, err
	})
	return h, err
}

// releaseKeys frees the keys the steps ids hold in flight, in their rows or, for steps
// written before migration 0014, in effects (keys: theirs).
func releaseKeys(ctx context.Context, t *txn, keys []string, ids []int64) error {
	b := &pgx.Batch{}
	b.Queue(`UPDATE steps SET key_slot = id, key_state = '', key_retain_until = NULL WHERE id = ANY($1) AND key_slot = 0 AND key_state = 'in_flight'`, ids)
	b.Queue(`DELETE FROM effects e USING unnest($1::text[], $2::bigint[]) AS r(k, id)
		WHERE e.effect_key = r.k AND e.step_id = r.id AND e.state = 'in_flight'`, keys, ids)
	return t.SendBatch(ctx, b).Close()
}

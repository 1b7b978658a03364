package sqlite

import (
	"database/sql"
	"errors"

	"github.com/onceflow/onceflow/store"
)

// The effect ledger lives in the step row (migration 0012): the step that holds an effect
// key has key_slot 0 and the key's state, times and result; at most one step holds a key
// (the unique index steps_key). effects keeps the keys no step holds: those written before
// the migration (the steps they belong to have key_slot NULL and keep using effects), and
// those retired when their step was purged or given another key. A key is free when no
// step holds it and effects has no row for it.

// keyFacts is what a step row holds of the ledger.
type keyFacts struct {
	// slot is 0 when the step holds its effect key, -1 for a step written before the
	// migration (its ledger row is in effects), its own ID otherwise.
	slot        int64
	state       string
	takenAt     int64
	completedAt int64
	retainUntil int64
	result      []byte
}

// ledgerColumns are the ledger facts of steps s, as keyDest reads them.
const ledgerColumns = `coalesce(s.key_slot, -1), s.key_state, s.key_taken_at, s.key_completed_at, s.key_retain_until, s.key_result`

func keyDest(k *keyFacts) []any {
	return []any{&k.slot, &k.state, &k.takenAt, &k.completedAt, &k.retainUntil, &k.result}
}

// holds reports whether the step holds its effect key in its row.
func (k *keyFacts) holds() bool { return k.slot == 0 }

// legacy reports whether the step's ledger row, if any, is in effects.
func (k *keyFacts) legacy() bool { return k.slot < 0 }

// holdsInFlight reports whether the step holds its key in flight.
func (k *keyFacts) holdsInFlight() bool {
	return k.holds() && k.state == string(store.EffectInFlight)
}

// keyHolderSQL is the ledger row of a key, as effectColumns: the step that holds it, or
// its row in effects.
const keyHolderSQL = `SELECT s.effect_key, s.key_state, s.fingerprint, CASE WHEN s.key_state = 'completed' THEN coalesce(s.key_result, s.output) END,
		s.run_id, s.id, s.workflow, s.name, s.key_taken_at, s.key_completed_at, s.key_retain_until
	FROM steps s WHERE s.effect_key = ?1 AND s.effect_key <> '' AND s.key_slot = 0
	UNION ALL
	SELECT ` + effectColumns + ` FROM effects WHERE effect_key = ?1
	LIMIT 1`

// keyHolder returns the ledger row of key as the transaction sees it, or nil for a free
// key.
func (w *writeTx) keyHolder(key string) (*store.Effect, error) {
	eff, err := scanEffect(w.queryRow(stmtKeyHolder, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return eff, err
}

// retireKey moves the key step id holds into effects, as it stands (in flight or
// completed, with its result and retention): the step is given another key, or goes.
func (w *writeTx) retireKey(id int64) error {
	if _, err := w.exec(stmtKeyRetire, id); err != nil {
		return err
	}
	_, err := w.exec(stmtKeyRelease, id)
	return err
}

// releaseKey frees the key st holds in flight, in its row or, for a step written before
// migration 0012, in effects.
func (w *writeTx) releaseKey(st *store.Step) error {
	if _, err := w.exec(stmtKeyReleaseInFlight, st.ID); err != nil {
		return err
	}
	if _, err := w.exec(stmtEffectRelease, st.EffectKey, st.ID); err != nil {
		return err
	}
	if ss := w.steps[st.ID]; ss != nil && ss.key.holdsInFlight() {
		ss.key = keyFacts{slot: st.ID}
	}
	return nil
}

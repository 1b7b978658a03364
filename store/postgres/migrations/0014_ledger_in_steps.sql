-- The effect ledger in the step row. The step that holds an effect key keeps its ledger
-- row: key_slot 0 (a step with a key it does not hold, as one that waited for it, reused
-- it or released it, has its own ID there; NULL for a step written before this migration,
-- whose ledger row stays in effects), key_state in_flight or completed, when it took and
-- completed the key, until when a completed key is remembered (NULL: forever), and the
-- result when it is not the step's output (a success recorded after the lease was lost).
-- Writers that give a key a holder take an advisory lock on the key first.
ALTER TABLE steps ADD COLUMN key_slot bigint;
ALTER TABLE steps ADD COLUMN key_state text NOT NULL DEFAULT '';
ALTER TABLE steps ADD COLUMN key_taken_at timestamptz;
ALTER TABLE steps ADD COLUMN key_completed_at timestamptz;
ALTER TABLE steps ADD COLUMN key_retain_until timestamptz;
ALTER TABLE steps ADD COLUMN key_result bytea;
-- One holder per key, and the steps that used a key.
CREATE UNIQUE INDEX steps_key ON steps (effect_key, key_slot) WHERE effect_key <> '';
CREATE INDEX steps_key_retain ON steps (key_retain_until) WHERE key_retain_until IS NOT NULL;
DROP INDEX steps_effect_key;

-- effects keeps the keys no step row holds: those written before this migration, and
-- those whose step was purged or given another key, as they were.

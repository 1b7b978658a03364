-- Retention: a completed ledger row may be purged from retain_until on (microseconds since
-- the Unix epoch). 0 keeps it forever, as every row written before this migration is kept.
ALTER TABLE effects ADD COLUMN retain_until INTEGER NOT NULL DEFAULT 0;
CREATE INDEX effects_retain_until ON effects (retain_until) WHERE retain_until > 0;

-- The purge walks finished runs by the time they last changed, oldest first.
CREATE INDEX runs_finished ON runs (updated_at, id) WHERE state IN ('completed', 'failed', 'cancelled');

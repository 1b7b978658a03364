-- Review: the attempt number at the last manual retry or replay; the retry policy counts
-- only the attempts after it, so a retried step gets a fresh attempt budget.
ALTER TABLE steps ADD COLUMN attempt_base INTEGER NOT NULL DEFAULT 0;

-- The review queue walks parked steps in ID order.
CREATE INDEX steps_review ON steps (id) WHERE state = 'needs_review';

-- Every correction of a run's input, with the JSON merge patch (RFC 7386) that made it.
-- Times are microseconds since the Unix epoch.
CREATE TABLE run_revisions (
    run_id        INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    revision      INTEGER NOT NULL,
    input_before  BLOB    NOT NULL,
    input_after   BLOB    NOT NULL,
    entity_before TEXT    NOT NULL DEFAULT '',
    entity_after  TEXT    NOT NULL DEFAULT '',
    diff          TEXT    NOT NULL,
    actor         TEXT    NOT NULL,
    note          TEXT    NOT NULL DEFAULT '',
    at            INTEGER NOT NULL,
    PRIMARY KEY (run_id, revision)
);

-- Audit answers by time range.
CREATE INDEX events_time ON events (at, id);

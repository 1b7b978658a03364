-- Review: the attempt number at the last manual retry or replay; the retry policy counts
-- only the attempts after it, so a retried step gets a fresh attempt budget.
ALTER TABLE steps ADD COLUMN attempt_base integer NOT NULL DEFAULT 0;

-- The review queue walks parked steps in ID order.
CREATE INDEX steps_review ON steps (id) WHERE state = 'needs_review';

-- Every correction of a run's input, with the JSON merge patch (RFC 7386) that made it.
CREATE TABLE run_revisions (
    run_id        bigint      NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    revision      integer     NOT NULL CHECK (revision >= 1),
    input_before  bytea       NOT NULL, -- JSON
    input_after   bytea       NOT NULL, -- JSON
    entity_before text        NOT NULL DEFAULT '',
    entity_after  text        NOT NULL DEFAULT '',
    diff          jsonb       NOT NULL,
    actor         text        NOT NULL,
    note          text        NOT NULL DEFAULT '',
    at            timestamptz NOT NULL,
    PRIMARY KEY (run_id, revision)
);

-- Audit answers by time range.
CREATE INDEX events_time ON events (at, id);

-- Runs: one execution of a workflow for one business event, unique per (workflow, run_key).
CREATE TABLE runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    workflow    TEXT    NOT NULL,
    run_key     TEXT    NOT NULL,
    entity      TEXT    NOT NULL DEFAULT '',
    input       BLOB    NOT NULL,
    input_hash  TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (workflow, run_key)
);
CREATE INDEX runs_entity ON runs (entity, id);
CREATE INDEX runs_state ON runs (state, id);

-- Steps: one side effect (or computation) of a run.
CREATE TABLE steps (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id           INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    workflow         TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    needs            TEXT    NOT NULL DEFAULT '[]',
    waiting          INTEGER NOT NULL DEFAULT 0,
    state            TEXT    NOT NULL,
    effect_key       TEXT    NOT NULL DEFAULT '',
    fingerprint      TEXT    NOT NULL DEFAULT '',
    attempt          INTEGER NOT NULL DEFAULT 0,
    next_at          INTEGER NOT NULL,
    lease_owner      TEXT    NOT NULL DEFAULT '',
    lease_expires_at INTEGER NOT NULL DEFAULT 0,
    last_outcome     TEXT    NOT NULL DEFAULT '',
    output           BLOB,
    last_error       TEXT    NOT NULL DEFAULT '',
    reason           TEXT    NOT NULL DEFAULT '',
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (run_id, name)
);
-- The claim query walks this index: due steps with nothing to wait for, oldest first.
CREATE INDEX steps_due ON steps (next_at, id) WHERE state IN ('pending', 'retrying') AND waiting = 0;
CREATE INDEX steps_lease ON steps (lease_expires_at) WHERE state = 'processing';
CREATE INDEX steps_effect_key ON steps (effect_key) WHERE effect_key <> '';

-- The effect ledger: one row per effect key, global across runs and workflows.
CREATE TABLE effects (
    effect_key   TEXT    PRIMARY KEY,
    state        TEXT    NOT NULL,
    fingerprint  TEXT    NOT NULL DEFAULT '',
    result       BLOB,
    run_id       INTEGER NOT NULL,
    step_id      INTEGER NOT NULL,
    workflow     TEXT    NOT NULL,
    step_name    TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    completed_at INTEGER NOT NULL DEFAULT 0
);

-- Attempts: one try of a step.
CREATE TABLE attempts (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id           INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_id          INTEGER NOT NULL REFERENCES steps (id) ON DELETE CASCADE,
    step_name        TEXT    NOT NULL,
    number           INTEGER NOT NULL,
    effect_key       TEXT    NOT NULL,
    worker           TEXT    NOT NULL,
    started_at       INTEGER NOT NULL,
    ended_at         INTEGER NOT NULL DEFAULT 0,
    outcome          TEXT    NOT NULL DEFAULT '',
    error            TEXT    NOT NULL DEFAULT '',
    response_status  INTEGER NOT NULL DEFAULT 0,
    response_excerpt TEXT    NOT NULL DEFAULT '',
    UNIQUE (step_id, number)
);
CREATE INDEX attempts_run ON attempts (run_id, id);

-- Events: the append-only audit trail.
CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at         INTEGER NOT NULL,
    type       TEXT    NOT NULL,
    run_id     INTEGER NOT NULL DEFAULT 0,
    step_id    INTEGER NOT NULL DEFAULT 0,
    workflow   TEXT    NOT NULL DEFAULT '',
    entity     TEXT    NOT NULL DEFAULT '',
    step_name  TEXT    NOT NULL DEFAULT '',
    effect_key TEXT    NOT NULL DEFAULT '',
    attempt    INTEGER NOT NULL DEFAULT 0,
    actor      TEXT    NOT NULL DEFAULT '',
    reason     TEXT    NOT NULL DEFAULT '',
    detail     TEXT    NOT NULL DEFAULT '{}'
);
CREATE INDEX events_run ON events (run_id, id);
CREATE INDEX events_entity ON events (entity, id) WHERE entity <> '';
CREATE INDEX events_effect_key ON events (effect_key, id) WHERE effect_key <> '';

CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'events are append-only');
END;

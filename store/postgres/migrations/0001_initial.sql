-- Runs: one execution of a workflow for one business event, unique per (workflow, run_key).
CREATE TABLE runs (
    id         bigserial   PRIMARY KEY,
    workflow   text        NOT NULL,
    run_key    text        NOT NULL,
    entity     text        NOT NULL DEFAULT '',
    input      bytea       NOT NULL, -- JSON, byte for byte as given
    input_hash text        NOT NULL,
    state      text        NOT NULL CHECK (state IN ('pending', 'processing', 'retrying', 'completed', 'failed', 'needs_review', 'skipped', 'cancelled')),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    UNIQUE (workflow, run_key)
);
CREATE INDEX runs_entity ON runs (entity, id);
CREATE INDEX runs_state ON runs (state, id);

-- Steps: one side effect (or computation) of a run.
CREATE TABLE steps (
    id               bigserial   PRIMARY KEY,
    run_id           bigint      NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    workflow         text        NOT NULL,
    name             text        NOT NULL,
    needs            text[]      NOT NULL DEFAULT '{}',
    waiting          integer     NOT NULL DEFAULT 0 CHECK (waiting >= 0),
    state            text        NOT NULL CHECK (state IN ('pending', 'processing', 'retrying', 'completed', 'failed', 'needs_review', 'skipped', 'cancelled')),
    effect_key       text        NOT NULL DEFAULT '',
    fingerprint      text        NOT NULL DEFAULT '',
    attempt          integer     NOT NULL DEFAULT 0,
    next_at          timestamptz NOT NULL,
    lease_owner      text        NOT NULL DEFAULT '',
    lease_expires_at timestamptz,
    last_outcome     text        NOT NULL DEFAULT '',
    output           bytea,      -- JSON
    last_error       text        NOT NULL DEFAULT '',
    reason           text        NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    UNIQUE (run_id, name)
);
-- The claim query walks this index: due steps with nothing to wait for, oldest first.
CREATE INDEX steps_due ON steps (next_at, id) WHERE state IN ('pending', 'retrying') AND waiting = 0;
CREATE INDEX steps_lease ON steps (lease_expires_at) WHERE state = 'processing';
CREATE INDEX steps_effect_key ON steps (effect_key) WHERE effect_key <> '';

-- The effect ledger: one row per effect key, global across runs and workflows.
CREATE TABLE effects (
    effect_key   text        PRIMARY KEY,
    state        text        NOT NULL CHECK (state IN ('in_flight', 'completed')),
    fingerprint  text        NOT NULL DEFAULT '',
    result       bytea,      -- JSON
    run_id       bigint      NOT NULL,
    step_id      bigint      NOT NULL,
    workflow     text        NOT NULL,
    step_name    text        NOT NULL,
    created_at   timestamptz NOT NULL,
    completed_at timestamptz
);

-- Attempts: one try of a step.
CREATE TABLE attempts (
    id               bigserial   PRIMARY KEY,
    run_id           bigint      NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step_id          bigint      NOT NULL REFERENCES steps (id) ON DELETE CASCADE,
    step_name        text        NOT NULL,
    number           integer     NOT NULL,
    effect_key       text        NOT NULL,
    worker           text        NOT NULL,
    started_at       timestamptz NOT NULL,
    ended_at         timestamptz,
    outcome          text        NOT NULL DEFAULT '',
    error            text        NOT NULL DEFAULT '',
    response_status  integer     NOT NULL DEFAULT 0,
    response_excerpt text        NOT NULL DEFAULT '',
    UNIQUE (step_id, number)
);
CREATE INDEX attempts_run ON attempts (run_id, id);

-- Events: the append-only audit trail. IDs are drawn at insert time; EventList only lists
-- IDs below those that transactions still in progress may commit (see package doc).
CREATE TABLE events (
    id         bigserial   PRIMARY KEY,
    at         timestamptz NOT NULL,
    type       text        NOT NULL,
    run_id     bigint      NOT NULL DEFAULT 0,
    step_id    bigint      NOT NULL DEFAULT 0,
    workflow   text        NOT NULL DEFAULT '',
    entity     text        NOT NULL DEFAULT '',
    step_name  text        NOT NULL DEFAULT '',
    effect_key text        NOT NULL DEFAULT '',
    attempt    integer     NOT NULL DEFAULT 0,
    actor      text        NOT NULL DEFAULT '',
    reason     text        NOT NULL DEFAULT '',
    detail     jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX events_run ON events (run_id, id);
CREATE INDEX events_entity ON events (entity, id) WHERE entity <> '';
CREATE INDEX events_effect_key ON events (effect_key, id) WHERE effect_key <> '';

CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events are append-only' USING ERRCODE = 'restrict_violation';
END
$$;
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    FOR EACH ROW EXECUTE FUNCTION events_append_only();

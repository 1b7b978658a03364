-- onceflow upgrade fixture v1 (postgres): the schema and rows of a database in which auditgolden.BuildEveryState
-- left runs in every state, written by the store as of commit 885bfd4dcdac326999e4380958e74e470fbd5ba7.
-- TestUpgradeInPlace loads it into an empty database and lets the current code migrate and finish it.
-- Rebuilt only by go test ./cmd/onceflow/internal/cli -run TestUpgradeInPlace -update-fixture,
-- on a commit whose migrations are the ones below; never edit it by hand.

-- schema_migrations, as the store creates it
CREATE TABLE schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL
);

-- migration 0001_initial.sql
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

-- migration 0002_leaders.sql
-- Leaders: one lease per duty (e.g. the lease reaper) so that one process among many runs it.
CREATE TABLE leaders (
    name       text        PRIMARY KEY,
    owner      text        NOT NULL,
    elected_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

-- migration 0003_entities.sql
-- Entities: business objects with a guarded state, changed only by compare-and-set.
CREATE TABLE entities (
    entity_key text        PRIMARY KEY,
    state      text        NOT NULL,
    version    bigint      NOT NULL,
    run_id     bigint      NOT NULL,
    effect_key text        NOT NULL,
    updated_at timestamptz NOT NULL
);

-- Every applied transition, keyed by the effect key that applied it.
CREATE TABLE entity_transitions (
    effect_key text        PRIMARY KEY,
    entity_key text        NOT NULL,
    from_state text        NOT NULL,
    to_state   text        NOT NULL,
    run_id     bigint      NOT NULL,
    step_id    bigint      NOT NULL,
    at         timestamptz NOT NULL
);
CREATE INDEX entity_transitions_entity ON entity_transitions (entity_key, at);

-- migration 0004_review.sql
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

-- migration 0005_retention.sql
-- Retention: a completed ledger row may be purged from retain_until on. NULL keeps it
-- forever, as every row written before this migration is kept.
ALTER TABLE effects ADD COLUMN retain_until timestamptz;
CREATE INDEX effects_retain_until ON effects (retain_until) WHERE retain_until IS NOT NULL;

-- The purge walks finished runs by the time they last changed, oldest first.
CREATE INDEX runs_finished ON runs (updated_at, id) WHERE state IN ('completed', 'failed', 'cancelled');

-- migration 0006_notifications.sql
-- Incidents of failure notifications: the review events of one kind (policy, workflow, step,
-- reason) within a window after the first one, announced once and digested when the window
-- ends.
CREATE TABLE incidents (
    id             bigserial   PRIMARY KEY,
    policy         text        NOT NULL,
    workflow       text        NOT NULL,
    step_name      text        NOT NULL,
    reason         text        NOT NULL,
    opened_at      timestamptz NOT NULL,
    ends_at        timestamptz NOT NULL,
    count          integer     NOT NULL CHECK (count >= 1),
    first          jsonb       NOT NULL,               -- the event that opened it
    repeats        jsonb       NOT NULL DEFAULT '[]',  -- the first few repeats
    first_event_id bigint      NOT NULL,
    last_event_id  bigint      NOT NULL,
    last_at        timestamptz NOT NULL,
    alerted_at     timestamptz,
    closed_at      timestamptz,
    -- An event opens at most one incident per policy.
    UNIQUE (policy, first_event_id)
);
CREATE INDEX incidents_open ON incidents (policy, workflow, step_name, reason, id) WHERE closed_at IS NULL;
CREATE INDEX incidents_due ON incidents (id) WHERE closed_at IS NULL;

-- Where a reader of the audit trail (the notifier) has read up to: an event ID.
CREATE TABLE incident_cursors (
    name       text        PRIMARY KEY,
    position   bigint      NOT NULL,
    updated_at timestamptz NOT NULL
);

-- migration 0007_controls.sql
-- Operators' controls over execution. The attempts of steps cancelled while they ran are
-- reaped like any other when their worker vanished.
CREATE INDEX steps_cancelled_lease ON steps (lease_expires_at) WHERE state = 'cancelled' AND lease_owner <> '';

-- A paused workflow keeps accepting runs; engines do
-- not claim its steps.
CREATE TABLE workflow_pauses (
    workflow  text        PRIMARY KEY,
    paused_at timestamptz NOT NULL,
    actor     text        NOT NULL,
    note      text        NOT NULL DEFAULT ''
);

-- Limits per destination shared by every process (internal/limit): a destination's
-- request slots, each taken by one process at a time until it gives it back or its hold
-- expires (a process that died), and its token bucket, with the time until which a 429's
-- Retry-After holds every request back.
CREATE TABLE destination_slots (
    destination text        NOT NULL,
    slot        integer     NOT NULL,
    owner       text        NOT NULL DEFAULT '',
    expires_at  timestamptz NOT NULL DEFAULT '-infinity',
    PRIMARY KEY (destination, slot)
);
CREATE TABLE destination_buckets (
    destination   text             PRIMARY KEY,
    tokens        double precision NOT NULL,
    updated_at    timestamptz      NOT NULL,
    blocked_until timestamptz      NOT NULL DEFAULT '-infinity'
);

-- migration 0008_schedules.sql
-- Schedules: how far each schedule has fired its ticks, so that a restart or a new leader
-- neither repeats nor loses one.
CREATE TABLE schedules (
    name        text        PRIMARY KEY,
    through     timestamptz NOT NULL,
    last_tick   timestamptz,
    last_run_id bigint      NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL
);

-- migration 0009_attempts_without_fks.sql
-- Attempts are written only by the store's claim, from the step rows the same statement
-- updates (UPDATE … RETURNING), and deleted only by retention, which deletes a run's
-- attempts before its steps and the run itself. Their foreign keys to runs and steps
-- checked, at every claim, what that statement guarantees, and share-locked the run's
-- and the step's rows (a multixact when a record of the same run updates the run at the
-- same time): without them the engine's steps/s on PostgreSQL rose by about 5 %.
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_run_id_fkey;
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_step_id_fkey;

-- migration 0010_step_progress.sql
-- The latest checkpoint of a long step (store.StepCheckpointer), JSON: the attempts after
-- it go on from there.
ALTER TABLE steps ADD COLUMN progress bytea;

-- rows
INSERT INTO schema_migrations (version, name, applied_at) VALUES ('1', 'initial', '2026-12-01 15:16:13.752689+00');
INSERT INTO schema_migrations (version, name, applied_at) VALUES ('2', 'leaders', '2026-12-01 15:16:13.800155+00');
INSERT INTO schema_migrations (version, name, applied_at) VALUES ('3', 'entities', '2026-12-01 15:16:13.89602+00');
INSERT INTO schema_migrations (version, name, applied_at) VALUES ('4', 'review', '2026-12-01 15:16:14.086048+00');
INSERT INTO schema_migrations (version, name, applied_at) VALUES ('5', 'retention', '2026-12-01 15:16:14.124597+00');
INSERT INTO schema_migrations (version, name, applied_at) VALUES ('6', 'notifications', '2026-12-01 15:16:14.156381+00');
INSERT INTO schema_migrations (version, name, applied_at) VALUES ('7', 'controls', '2026-12-01 15:16:14.193612+00');
INSERT INTO schema_migrations (version, name, applied_at) VALUES ('8', 'schedules', '2026-12-01 15:16:14.244327+00');
INSERT INTO schema_migrations (version, name, applied_at) VALUES ('9', 'attempts_without_fks', '2026-12-01 15:16:14.252347+00');
INSERT INTO schema_migrations (version, name, applied_at) VALUES ('10', 'step_progress', '2026-12-01 15:16:14.269882+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('2', 'orders', 'order-1', 'order:o-1', E'\\x7b226f72646572223a226f2d31227d', 'be2472c17de3278dba7def61413162208d6766b87b68049b98e4f97259dd70f5', 'completed', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.7+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('3', 'trial', 'trial-1', 'account:a-1', E'\\x7b226163636f756e74223a22612d31227d', '39e3d7cc6ee3b278e6f23f6bc2af9f9db07dc14e85110ee6f708ae11c89542b1', 'pending', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.6+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('4', 'export', 'export-1', 'export:e-1', E'\\x7b226578706f7274223a22652d31227d', '547fbbee7fed31417c8361fed781ab524a1ced286c6aff45362e7ee0398da798', 'failed', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.3+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('5', 'refund', 'refund-1', 'refund:r-1', E'\\x7b22726566756e64223a22722d31227d', '36ec133fccfa58ca53d5fe526faccfc8349635f22eda6da1060e8cde2c2dbefe', 'cancelled', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.1+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('6', 'payment', 'payment-1', 'payment:p-1', E'\\x7b227061796d656e74223a22702d31227d', '8c07ecbd1b241603bf7722f82fb98be944b4b8c588f96135a3af0fc53b0c0bb7', 'needs_review', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.3+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('7', 'shipment', 'ship-1', 'parcel:s-1b', E'\\x7b22616464726573735f6f6b223a747275652c2270617263656c223a22732d3162227d', '8181eebf642428a9ad63602ffd243908a2a3a9ee3e87d9f1f2673f56782ae821', 'completed', '2026-03-02 09:20:00.1+00', '2026-03-02 09:21:00.8+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('8', 'shipment', 'ship-2', 'parcel:s-2', E'\\x7b22616464726573735f6f6b223a66616c73652c2270617263656c223a22732d32227d', '9a97d7516e4b1db88b77d764becd3e2b797aa3cfaae673250042abeb17c3404c', 'needs_review', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.6+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('9', 'invoice', 'inv-late', 'invoice:i-1', E'\\x7b22696e766f696365223a22692d31227d', '0d6e388d489f97ceb8d34098f76aaebf4a1e2a6bfc1fce164bd8b13bcc61377e', 'completed', '2026-03-02 09:22:00.8+00', '2026-03-02 09:22:31.9+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('10', 'report', 'report-20m:2026-03-02T09:20:00Z', '', E'\\x7b227363686564756c65223a7b226e616d65223a227265706f72742d32306d222c22706572696f64223a22323032362d30332d30325430393a3230222c2270726576696f7573223a22323032362d30332d30325430393a30303a30305a222c2274696d65223a22323032362d30332d30325430393a32303a30305a227d7d', 'cb154d50308fb320150094191f3e951e52a64ef40d7ce9661cf884ea921bdb97', 'completed', '2026-03-02 09:24:31.9+00', '2026-03-02 09:24:32+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('11', 'sync', 'sync-1', 'account:a-2', E'\\x7b226163636f756e74223a22612d32227d', '95d2df0d2c7f941cee9813a10aeb2fa6c14df01c863d06d45d5fac7f69b4f1dd', 'retrying', '2026-03-02 09:24:31.9+00', '2026-03-02 09:24:32+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('12', 'reminder', 'remind-1', 'account:a-3', E'\\x7b226163636f756e74223a22612d33227d', '5876825d1bb1ef7996d09f350b8eb6ec16c1b2d61ab1b7af76f8c46dbf8cb987', 'pending', '2026-03-02 09:24:31.9+00', '2026-03-02 09:24:31.9+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('13', 'newsletter', 'issue-12', 'list:l-1', E'\\x7b226973737565223a31322c226c697374223a226c2d31227d', '8b4707a93b6155a83e3e0776e906275299321ca972fc40a086709262292760b2', 'pending', '2026-03-02 09:24:31.9+00', '2026-03-02 09:24:31.9+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('14', 'report', 'report-20m:2026-03-02T09:40:00Z', '', E'\\x7b227363686564756c65223a7b226e616d65223a227265706f72742d32306d222c22706572696f64223a22323032362d30332d30325430393a3430222c2270726576696f7573223a22323032362d30332d30325430393a32303a30305a222c2274696d65223a22323032362d30332d30325430393a34303a30305a227d7d', '12a2ad9a2fa3a4bfeb1a9cb11f3c89dc51a915975abf287a89cd15094c434a86', 'completed', '2026-03-02 09:44:32+00', '2026-03-02 09:44:32.1+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('15', 'transfer', 'x-1', 'transfer:x-1', E'\\x7b227472616e73666572223a22782d31227d', '441bf371a2406515bdf2f9a47893da61b889bfe57b120bef3210808d62a5090e', 'processing', '2026-03-02 09:44:32.1+00', '2026-03-02 09:44:32.1+00');
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES ('16', 'transfer', 'x-2', 'transfer:x-2', E'\\x7b227472616e73666572223a22782d32227d', '596badd605d45c4b35bfb0c5315c16c8a8b547e114da095bbfce2c64eda9ead0', 'processing', '2026-03-02 09:57:32.1+00', '2026-03-02 09:57:32.1+00');
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('2', '2', 'orders', 'reserve', '{}', '0', 'completed', 'reserve:o-1', '', '1', '2026-03-02 09:20:00.2+00', '', NULL, 'success', E'\\x7b22646f6e65223a22726573657276653a6f2d31227d', '', '', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.2+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('3', '2', 'orders', 'charge', '{reserve}', '0', 'completed', 'charge:o-1', '', '1', '2026-03-02 09:20:00.6+00', '', NULL, 'success', E'\\x7b22646f6e65223a226368617267653a6f2d31227d', '', '', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.6+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('4', '2', 'orders', 'notify', '{charge}', '0', 'completed', 'notify:o-1', '', '1', '2026-03-02 09:20:00.7+00', '', NULL, 'success', E'\\x7b22646f6e65223a226e6f746966793a6f2d31227d', '', '', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.7+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('5', '3', 'trial', 'welcome', '{}', '0', 'completed', 'welcome:a-1', '', '1', '2026-03-02 09:20:00.3+00', '', NULL, 'success', E'\\x7b22646f6e65223a2277656c636f6d653a612d31227d', '', '', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.3+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('6', '3', 'trial', 'upsell', '{welcome}', '0', 'skipped', '', '', '0', '2026-03-02 09:20:00.3+00', '', NULL, '', NULL, '', 'condition_false', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.6+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('7', '3', 'trial', 'nudge', '{welcome}', '0', 'pending', '', '', '0', '2026-03-02 10:50:00.3+00', '', NULL, '', NULL, '', 'delayed', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.6+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('8', '4', 'export', 'upload', '{}', '0', 'failed', 'upload:e-1', '', '1', '2026-03-02 09:20:00.3+00', '', NULL, 'permanent', NULL, 'bucket not found (404)', 'permanent_error', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.3+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('9', '4', 'export', 'announce', '{upload}', '1', 'cancelled', '', '', '0', '2026-03-02 09:20:00.1+00', '', NULL, '', NULL, '', 'dependency_failed', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.3+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('10', '5', 'refund', 'approve', '{}', '0', 'cancelled', '', '', '0', '2026-03-02 09:20:00.1+00', '', NULL, '', NULL, '', 'run_cancelled', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.1+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('11', '5', 'refund', 'pay', '{approve}', '1', 'cancelled', '', '', '0', '2026-03-02 09:20:00.1+00', '', NULL, '', NULL, '', 'run_cancelled', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.1+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('12', '6', 'payment', 'do', '{}', '0', 'needs_review', 'capture:p-1', '', '1', '2026-03-02 09:20:00.3+00', '', NULL, 'unknown', NULL, 'connection reset after the request was sent', 'outcome_unknown', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.3+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('13', '7', 'shipment', 'label', '{}', '0', 'completed', 'label:s-1', '', '1', '2026-03-02 09:20:00.4+00', '', NULL, 'success', E'\\x7b22646f6e65223a226c6162656c3a732d31227d', '', '', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.4+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('14', '7', 'shipment', 'dispatch', '{label}', '0', 'completed', 'dispatch:s-1b', '', '2', '2026-03-02 09:21:00.8+00', '', NULL, 'success', E'\\x7b22646f6e65223a2264697370617463683a732d3162227d', '', '', '2026-03-02 09:20:00.1+00', '2026-03-02 09:21:00.8+00', '1', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('15', '8', 'shipment', 'label', '{}', '0', 'completed', 'label:s-2', '', '1', '2026-03-02 09:20:00.5+00', '', NULL, 'success', E'\\x7b22646f6e65223a226c6162656c3a732d32227d', '', '', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.5+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('16', '8', 'shipment', 'dispatch', '{label}', '0', 'needs_review', 'dispatch:s-2', '', '1', '2026-03-02 09:20:00.6+00', '', NULL, 'permanent', NULL, 'carrier refused the address (422)', 'permanent_error', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.6+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('17', '9', 'invoice', 'do', '{}', '0', 'completed', 'send:i-1', '', '1', '2026-03-02 09:22:31.8+00', '', NULL, 'unknown', E'\\x7b22646f6e65223a2273656e643a692d31227d', 'lease held by "golden-worker" expired at 2026-03-02T09:22:30.8Z without a result; the outcome is unknown', 'effect_reused', '2026-03-02 09:22:00.8+00', '2026-03-02 09:22:31.9+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('18', '10', 'report', 'do', '{}', '0', 'completed', 'report:report-20m:2026-03-02T09:20:00Z', '', '1', '2026-03-02 09:24:32+00', '', NULL, 'success', E'\\x7b22646f6e65223a227265706f72743a7265706f72742d32306d3a323032362d30332d30325430393a32303a30305a227d', '', '', '2026-03-02 09:24:31.9+00', '2026-03-02 09:24:32+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('19', '11', 'sync', 'do', '{}', '0', 'retrying', 'push:a-2', '', '1', '2026-03-02 10:39:32+00', '', NULL, 'retryable', NULL, 'rate limited (429)', 'retryable_error', '2026-03-02 09:24:31.9+00', '2026-03-02 09:24:32+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('20', '12', 'reminder', 'do', '{}', '0', 'pending', '', '', '0', '2026-03-02 11:24:31.9+00', '', NULL, '', NULL, '', 'delayed', '2026-03-02 09:24:31.9+00', '2026-03-02 09:24:32+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('21', '13', 'newsletter', 'do', '{}', '0', 'pending', '', '', '0', '2026-03-02 09:24:31.9+00', '', NULL, '', NULL, '', '', '2026-03-02 09:24:31.9+00', '2026-03-02 09:24:31.9+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('22', '14', 'report', 'do', '{}', '0', 'completed', 'report:report-20m:2026-03-02T09:40:00Z', '', '1', '2026-03-02 09:44:32.1+00', '', NULL, 'success', E'\\x7b22646f6e65223a227265706f72743a7265706f72742d32306d3a323032362d30332d30325430393a34303a30305a227d', '', '', '2026-03-02 09:44:32+00', '2026-03-02 09:44:32.1+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('23', '15', 'transfer', 'do', '{}', '0', 'processing', 'transfer:x-1', '', '1', '2026-03-02 09:44:32.1+00', 'vanished-worker', '2026-03-02 09:46:02.1+00', '', NULL, '', '', '2026-03-02 09:44:32.1+00', '2026-03-02 09:44:32.1+00', '0', NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES ('24', '16', 'transfer', 'do', '{}', '0', 'processing', 'transfer:x-2', '', '1', '2026-03-02 09:57:32.1+00', 'other-worker', '2026-03-02 10:27:32.1+00', '', NULL, '', '', '2026-03-02 09:57:32.1+00', '2026-03-02 09:57:32.1+00', '0', NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('capture:p-1', 'in_flight', '', NULL, '6', '12', 'payment', 'do', '2026-03-02 09:20:00.3+00', NULL, NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('charge:o-1', 'completed', '', E'\\x7b22646f6e65223a226368617267653a6f2d31227d', '2', '3', 'orders', 'charge', '2026-03-02 09:20:00.5+00', '2026-03-02 09:20:00.6+00', NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('digest:t-1:2026-W09', 'completed', '', E'\\x7b22646f6e65223a226469676573743a742d313a323032362d573039227d', '1', '1', 'digest', 'do', '2026-03-02 09:00:00+00', '2026-03-02 09:00:00.1+00', NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('dispatch:s-1b', 'completed', '', E'\\x7b22646f6e65223a2264697370617463683a732d3162227d', '7', '14', 'shipment', 'dispatch', '2026-03-02 09:21:00.7+00', '2026-03-02 09:21:00.8+00', NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('label:s-1', 'completed', '', E'\\x7b22646f6e65223a226c6162656c3a732d31227d', '7', '13', 'shipment', 'label', '2026-03-02 09:20:00.3+00', '2026-03-02 09:20:00.4+00', NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('label:s-2', 'completed', '', E'\\x7b22646f6e65223a226c6162656c3a732d32227d', '8', '15', 'shipment', 'label', '2026-03-02 09:20:00.4+00', '2026-03-02 09:20:00.5+00', NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('notify:o-1', 'completed', '', E'\\x7b22646f6e65223a226e6f746966793a6f2d31227d', '2', '4', 'orders', 'notify', '2026-03-02 09:20:00.6+00', '2026-03-02 09:20:00.7+00', NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('push:a-2', 'in_flight', '', NULL, '11', '19', 'sync', 'do', '2026-03-02 09:24:32+00', NULL, NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('report:report-20m:2026-03-02T09:20:00Z', 'completed', '', E'\\x7b22646f6e65223a227265706f72743a7265706f72742d32306d3a323032362d30332d30325430393a32303a30305a227d', '10', '18', 'report', 'do', '2026-03-02 09:24:31.9+00', '2026-03-02 09:24:32+00', NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('report:report-20m:2026-03-02T09:40:00Z', 'completed', '', E'\\x7b22646f6e65223a227265706f72743a7265706f72742d32306d3a323032362d30332d30325430393a34303a30305a227d', '14', '22', 'report', 'do', '2026-03-02 09:44:32+00', '2026-03-02 09:44:32.1+00', NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('reserve:o-1', 'completed', '', E'\\x7b22646f6e65223a22726573657276653a6f2d31227d', '2', '2', 'orders', 'reserve', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.2+00', NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('send:i-1', 'completed', '', E'\\x7b22646f6e65223a2273656e643a692d31227d', '9', '17', 'invoice', 'do', '2026-03-02 09:22:00.8+00', '2026-03-02 09:22:31.9+00', NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('transfer:x-1', 'in_flight', '', NULL, '15', '23', 'transfer', 'do', '2026-03-02 09:44:32.1+00', NULL, NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('transfer:x-2', 'in_flight', '', NULL, '16', '24', 'transfer', 'do', '2026-03-02 09:57:32.1+00', NULL, NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('welcome:a-1', 'completed', '', E'\\x7b22646f6e65223a2277656c636f6d653a612d31227d', '3', '5', 'trial', 'welcome', '2026-03-02 09:20:00.2+00', '2026-03-02 09:20:00.3+00', NULL);
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('2', '2', '2', 'reserve', '1', 'reserve:o-1', 'golden-worker', '2026-03-02 09:20:00.1+00', '2026-03-02 09:20:00.2+00', 'success', '', '200', 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('3', '3', '5', 'welcome', '1', 'welcome:a-1', 'golden-worker', '2026-03-02 09:20:00.2+00', '2026-03-02 09:20:00.3+00', 'success', '', '200', 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('4', '4', '8', 'upload', '1', 'upload:e-1', 'golden-worker', '2026-03-02 09:20:00.3+00', '2026-03-02 09:20:00.3+00', 'permanent', 'bucket not found (404)', '0', '');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('5', '6', '12', 'do', '1', 'capture:p-1', 'golden-worker', '2026-03-02 09:20:00.3+00', '2026-03-02 09:20:00.3+00', 'unknown', 'connection reset after the request was sent', '0', '');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('6', '7', '13', 'label', '1', 'label:s-1', 'golden-worker', '2026-03-02 09:20:00.3+00', '2026-03-02 09:20:00.4+00', 'success', '', '200', 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('7', '8', '15', 'label', '1', 'label:s-2', 'golden-worker', '2026-03-02 09:20:00.4+00', '2026-03-02 09:20:00.5+00', 'success', '', '200', 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('8', '2', '3', 'charge', '1', 'charge:o-1', 'golden-worker', '2026-03-02 09:20:00.5+00', '2026-03-02 09:20:00.6+00', 'success', '', '200', 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('9', '7', '14', 'dispatch', '1', 'dispatch:s-1', 'golden-worker', '2026-03-02 09:20:00.6+00', '2026-03-02 09:20:00.6+00', 'permanent', 'carrier refused the address (422)', '0', '');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('10', '8', '16', 'dispatch', '1', 'dispatch:s-2', 'golden-worker', '2026-03-02 09:20:00.6+00', '2026-03-02 09:20:00.6+00', 'permanent', 'carrier refused the address (422)', '0', '');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('11', '2', '4', 'notify', '1', 'notify:o-1', 'golden-worker', '2026-03-02 09:20:00.6+00', '2026-03-02 09:20:00.7+00', 'success', '', '200', 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('12', '7', '14', 'dispatch', '2', 'dispatch:s-1b', 'golden-worker', '2026-03-02 09:21:00.7+00', '2026-03-02 09:21:00.8+00', 'success', '', '200', 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('13', '9', '17', 'do', '1', 'send:i-1', 'golden-worker', '2026-03-02 09:22:00.8+00', '2026-03-02 09:22:31.9+00', 'success', '', '200', 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('14', '10', '18', 'do', '1', 'report:report-20m:2026-03-02T09:20:00Z', 'golden-worker', '2026-03-02 09:24:31.9+00', '2026-03-02 09:24:32+00', 'success', '', '200', 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('15', '11', '19', 'do', '1', 'push:a-2', 'golden-worker', '2026-03-02 09:24:32+00', '2026-03-02 09:24:32+00', 'retryable', 'rate limited (429)', '0', '');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('16', '14', '22', 'do', '1', 'report:report-20m:2026-03-02T09:40:00Z', 'golden-worker', '2026-03-02 09:44:32+00', '2026-03-02 09:44:32.1+00', 'success', '', '200', 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('17', '15', '23', 'do', '1', 'transfer:x-1', 'vanished-worker', '2026-03-02 09:44:32.1+00', NULL, '', '', '0', '');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES ('18', '16', '24', 'do', '1', 'transfer:x-2', 'other-worker', '2026-03-02 09:57:32.1+00', NULL, '', '', '0', '');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('6', '2026-03-02 09:20:00.1+00', 'retention.purged', '0', '0', '', '', '', '', '0', 'retention-job', '', '{"now": "2026-03-02T09:20:00.1Z", "runs": 1, "batch": 1, "steps": 1, "events": 5, "effects": 0, "attempts": 1, "runs_before": "2026-03-02T09:10:00.1Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('7', '2026-03-02 09:20:00.1+00', 'run.created', '2', '0', 'orders', 'order:o-1', '', '', '0', 'api', '', '{"steps": 3, "run_key": "order-1"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('8', '2026-03-02 09:20:00.1+00', 'run.created', '3', '0', 'trial', 'account:a-1', '', '', '0', 'api', '', '{"steps": 3, "run_key": "trial-1"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('9', '2026-03-02 09:20:00.1+00', 'run.created', '4', '0', 'export', 'export:e-1', '', '', '0', 'api', '', '{"steps": 2, "run_key": "export-1"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('10', '2026-03-02 09:20:00.1+00', 'run.created', '5', '0', 'refund', 'refund:r-1', '', '', '0', 'api', '', '{"steps": 2, "run_key": "refund-1"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('11', '2026-03-02 09:20:00.1+00', 'step.cancelled', '5', '10', 'refund', 'refund:r-1', 'approve', '', '0', 'ops-desk', 'run_cancelled', '{"note": "request withdrawn", "key_held": false, "previous_state": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('12', '2026-03-02 09:20:00.1+00', 'step.cancelled', '5', '11', 'refund', 'refund:r-1', 'pay', '', '0', 'ops-desk', 'run_cancelled', '{"note": "request withdrawn", "key_held": false, "previous_state": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('13', '2026-03-02 09:20:00.1+00', 'run.cancelled', '5', '0', 'refund', 'refund:r-1', '', '', '0', 'ops-desk', 'run_cancelled', '{"note": "request withdrawn", "running": [], "cancelled": ["approve", "pay"], "previous_state": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('14', '2026-03-02 09:20:00.1+00', 'run.state_changed', '5', '0', 'refund', 'refund:r-1', '', '', '0', 'ops-desk', '', '{"to": "cancelled", "from": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('15', '2026-03-02 09:20:00.1+00', 'run.created', '6', '0', 'payment', 'payment:p-1', '', '', '0', 'api', '', '{"steps": 1, "run_key": "payment-1"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('16', '2026-03-02 09:20:00.1+00', 'run.created', '7', '0', 'shipment', 'parcel:s-1', '', '', '0', 'api', '', '{"steps": 2, "run_key": "ship-1"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('17', '2026-03-02 09:20:00.1+00', 'run.created', '8', '0', 'shipment', 'parcel:s-2', '', '', '0', 'api', '', '{"steps": 2, "run_key": "ship-2"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('18', '2026-03-02 09:20:00.1+00', 'step.claimed', '2', '2', 'orders', 'order:o-1', 'reserve', 'reserve:o-1', '1', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:20:30.1Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('19', '2026-03-02 09:20:00.1+00', 'run.state_changed', '2', '0', 'orders', 'order:o-1', '', '', '0', 'engine', '', '{"to": "processing", "from": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('20', '2026-03-02 09:20:00.2+00', 'step.completed', '2', '2', 'orders', 'order:o-1', 'reserve', 'reserve:o-1', '1', 'golden-worker', '', '{"outcome": "success", "response_status": 200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('21', '2026-03-02 09:20:00.2+00', 'step.claimed', '3', '5', 'trial', 'account:a-1', 'welcome', 'welcome:a-1', '1', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:20:30.2Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('22', '2026-03-02 09:20:00.2+00', 'run.state_changed', '3', '0', 'trial', 'account:a-1', '', '', '0', 'engine', '', '{"to": "processing", "from": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('23', '2026-03-02 09:20:00.3+00', 'step.completed', '3', '5', 'trial', 'account:a-1', 'welcome', 'welcome:a-1', '1', 'golden-worker', '', '{"outcome": "success", "response_status": 200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('24', '2026-03-02 09:20:00.3+00', 'step.claimed', '4', '8', 'export', 'export:e-1', 'upload', 'upload:e-1', '1', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:20:30.3Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('25', '2026-03-02 09:20:00.3+00', 'run.state_changed', '4', '0', 'export', 'export:e-1', '', '', '0', 'engine', '', '{"to": "processing", "from": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('26', '2026-03-02 09:20:00.3+00', 'step.failed', '4', '8', 'export', 'export:e-1', 'upload', 'upload:e-1', '1', 'golden-worker', 'permanent_error', '{"error": "bucket not found (404)", "policy": {"max": "5m0s", "initial": "2s", "multiplier": 2, "on_failure": "fail", "on_unknown": "retry", "max_attempts": 6}, "outcome": "permanent"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('27', '2026-03-02 09:20:00.3+00', 'step.cancelled', '4', '9', 'export', 'export:e-1', 'announce', '', '0', 'engine', 'dependency_failed', '{}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('28', '2026-03-02 09:20:00.3+00', 'run.state_changed', '4', '0', 'export', 'export:e-1', '', '', '0', 'golden-worker', '', '{"to": "failed", "from": "processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('29', '2026-03-02 09:20:00.3+00', 'step.claimed', '6', '12', 'payment', 'payment:p-1', 'do', 'capture:p-1', '1', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:20:30.3Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('30', '2026-03-02 09:20:00.3+00', 'run.state_changed', '6', '0', 'payment', 'payment:p-1', '', '', '0', 'engine', '', '{"to": "processing", "from": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('31', '2026-03-02 09:20:00.3+00', 'step.needs_review', '6', '12', 'payment', 'payment:p-1', 'do', 'capture:p-1', '1', 'golden-worker', 'outcome_unknown', '{"error": "connection reset after the request was sent", "policy": {"max": "5m0s", "initial": "2s", "multiplier": 2, "on_failure": "needs_review", "on_unknown": "needs_review", "max_attempts": 6}, "outcome": "unknown"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('32', '2026-03-02 09:20:00.3+00', 'run.state_changed', '6', '0', 'payment', 'payment:p-1', '', '', '0', 'golden-worker', '', '{"to": "needs_review", "from": "processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('33', '2026-03-02 09:20:00.3+00', 'step.claimed', '7', '13', 'shipment', 'parcel:s-1', 'label', 'label:s-1', '1', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:20:30.3Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('34', '2026-03-02 09:20:00.3+00', 'run.state_changed', '7', '0', 'shipment', 'parcel:s-1', '', '', '0', 'engine', '', '{"to": "processing", "from": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('35', '2026-03-02 09:20:00.4+00', 'step.completed', '7', '13', 'shipment', 'parcel:s-1', 'label', 'label:s-1', '1', 'golden-worker', '', '{"outcome": "success", "response_status": 200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('36', '2026-03-02 09:20:00.4+00', 'step.claimed', '8', '15', 'shipment', 'parcel:s-2', 'label', 'label:s-2', '1', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:20:30.4Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('37', '2026-03-02 09:20:00.4+00', 'run.state_changed', '8', '0', 'shipment', 'parcel:s-2', '', '', '0', 'engine', '', '{"to": "processing", "from": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('38', '2026-03-02 09:20:00.5+00', 'step.completed', '8', '15', 'shipment', 'parcel:s-2', 'label', 'label:s-2', '1', 'golden-worker', '', '{"outcome": "success", "response_status": 200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('39', '2026-03-02 09:20:00.5+00', 'step.claimed', '2', '3', 'orders', 'order:o-1', 'charge', 'charge:o-1', '1', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:20:30.5Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('40', '2026-03-02 09:20:00.6+00', 'step.completed', '2', '3', 'orders', 'order:o-1', 'charge', 'charge:o-1', '1', 'golden-worker', '', '{"outcome": "success", "response_status": 200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('41', '2026-03-02 09:20:00.6+00', 'step.skipped', '3', '6', 'trial', 'account:a-1', 'upsell', '', '0', 'engine', 'condition_false', '{}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('42', '2026-03-02 09:20:00.6+00', 'step.delayed', '3', '7', 'trial', 'account:a-1', 'nudge', '', '0', 'engine', 'delayed', '{"wait": "1h29m59.7s", "due_at": "2026-03-02T10:50:00.3Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('43', '2026-03-02 09:20:00.6+00', 'run.state_changed', '3', '0', 'trial', 'account:a-1', '', '', '0', 'engine', '', '{"to": "pending", "from": "processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('44', '2026-03-02 09:20:00.6+00', 'step.claimed', '7', '14', 'shipment', 'parcel:s-1', 'dispatch', 'dispatch:s-1', '1', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:20:30.6Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('45', '2026-03-02 09:20:00.6+00', 'step.needs_review', '7', '14', 'shipment', 'parcel:s-1', 'dispatch', 'dispatch:s-1', '1', 'golden-worker', 'permanent_error', '{"error": "carrier refused the address (422)", "policy": {"max": "5m0s", "initial": "2s", "multiplier": 2, "on_failure": "needs_review", "on_unknown": "retry", "max_attempts": 6}, "outcome": "permanent"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('46', '2026-03-02 09:20:00.6+00', 'run.state_changed', '7', '0', 'shipment', 'parcel:s-1', '', '', '0', 'golden-worker', '', '{"to": "needs_review", "from": "processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('47', '2026-03-02 09:20:00.6+00', 'step.claimed', '8', '16', 'shipment', 'parcel:s-2', 'dispatch', 'dispatch:s-2', '1', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:20:30.6Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('48', '2026-03-02 09:20:00.6+00', 'step.needs_review', '8', '16', 'shipment', 'parcel:s-2', 'dispatch', 'dispatch:s-2', '1', 'golden-worker', 'permanent_error', '{"error": "carrier refused the address (422)", "policy": {"max": "5m0s", "initial": "2s", "multiplier": 2, "on_failure": "needs_review", "on_unknown": "retry", "max_attempts": 6}, "outcome": "permanent"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('49', '2026-03-02 09:20:00.6+00', 'run.state_changed', '8', '0', 'shipment', 'parcel:s-2', '', '', '0', 'golden-worker', '', '{"to": "needs_review", "from": "processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('50', '2026-03-02 09:20:00.6+00', 'step.claimed', '2', '4', 'orders', 'order:o-1', 'notify', 'notify:o-1', '1', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:20:30.6Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('51', '2026-03-02 09:20:00.7+00', 'step.completed', '2', '4', 'orders', 'order:o-1', 'notify', 'notify:o-1', '1', 'golden-worker', '', '{"outcome": "success", "response_status": 200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('52', '2026-03-02 09:20:00.7+00', 'run.state_changed', '2', '0', 'orders', 'order:o-1', '', '', '0', 'golden-worker', '', '{"to": "completed", "from": "processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('53', '2026-03-02 09:21:00.7+00', 'run.input_corrected', '7', '0', 'shipment', 'parcel:s-1b', '', '', '0', 'ops-desk', 'correction', '{"note": "parcel relabelled", "fields": ["address_ok", "parcel"], "revision": 1, "entity_after": "parcel:s-1b", "entity_before": "parcel:s-1"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('54', '2026-03-02 09:21:00.7+00', 'review.replayed', '7', '14', 'shipment', 'parcel:s-1b', 'dispatch', 'dispatch:s-1', '1', 'ops-desk', 'replay', '{"note": "parcel relabelled", "revision": 1, "last_error": "carrier refused the address (422)", "previous_state": "needs_review", "previous_reason": "permanent_error"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('55', '2026-03-02 09:21:00.7+00', 'run.state_changed', '7', '0', 'shipment', 'parcel:s-1b', '', '', '0', 'ops-desk', '', '{"to": "processing", "from": "needs_review"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('56', '2026-03-02 09:21:00.7+00', 'step.claimed', '7', '14', 'shipment', 'parcel:s-1b', 'dispatch', 'dispatch:s-1b', '2', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:21:30.7Z", "previous_outcome": "permanent"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('57', '2026-03-02 09:21:00.8+00', 'step.completed', '7', '14', 'shipment', 'parcel:s-1b', 'dispatch', 'dispatch:s-1b', '2', 'golden-worker', '', '{"outcome": "success", "response_status": 200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('58', '2026-03-02 09:21:00.8+00', 'run.state_changed', '7', '0', 'shipment', 'parcel:s-1b', '', '', '0', 'golden-worker', '', '{"to": "completed", "from": "processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('59', '2026-03-02 09:22:00.8+00', 'run.created', '9', '0', 'invoice', 'invoice:i-1', '', '', '0', 'api', '', '{"steps": 1, "run_key": "inv-late"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('60', '2026-03-02 09:22:00.8+00', 'step.claimed', '9', '17', 'invoice', 'invoice:i-1', 'do', 'send:i-1', '1', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:22:30.8Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('61', '2026-03-02 09:22:00.8+00', 'run.state_changed', '9', '0', 'invoice', 'invoice:i-1', '', '', '0', 'engine', '', '{"to": "processing", "from": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('62', '2026-03-02 09:22:31.8+00', 'lease.expired', '9', '17', 'invoice', 'invoice:i-1', 'do', 'send:i-1', '1', 'reaper', 'lease_expired', '{"owner": "golden-worker", "lease_expired_at": "2026-03-02T09:22:30.8Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('63', '2026-03-02 09:22:31.8+00', 'step.retry_scheduled', '9', '17', 'invoice', 'invoice:i-1', 'do', 'send:i-1', '1', 'reaper', 'lease_expired', '{"why": "retry with the same effect key; the destination deduplicates", "policy": {"on_unknown": "retry", "max_attempts": 6}, "next_at": "2026-03-02T09:22:31.8Z", "outcome": "unknown"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('64', '2026-03-02 09:22:31.8+00', 'run.state_changed', '9', '0', 'invoice', 'invoice:i-1', '', '', '0', 'reaper', '', '{"to": "retrying", "from": "processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('65', '2026-03-02 09:22:31.9+00', 'lease.lost', '9', '17', 'invoice', 'invoice:i-1', 'do', 'send:i-1', '1', 'golden-worker', '', '{"owner": "golden-worker", "attempt": 1, "outcome": "success", "step_owner": "", "step_state": "retrying", "step_attempt": 1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('66', '2026-03-02 09:22:31.9+00', 'lease.lost_result_kept', '9', '17', 'invoice', 'invoice:i-1', 'do', 'send:i-1', '1', 'golden-worker', '', '{"attempt": 1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('67', '2026-03-02 09:22:31.9+00', 'effect.reused', '9', '17', 'invoice', 'invoice:i-1', 'do', 'send:i-1', '1', 'engine', 'effect_completed', '{"completed_at": "2026-03-02T09:22:31.9Z", "completed_by_run": 9, "completed_by_step": "do", "completed_by_workflow": "invoice"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('68', '2026-03-02 09:22:31.9+00', 'step.completed', '9', '17', 'invoice', 'invoice:i-1', 'do', 'send:i-1', '1', 'engine', 'effect_reused', '{"completed_at": "2026-03-02T09:22:31.9Z", "completed_by_run": 9, "completed_by_step": "do", "completed_by_workflow": "invoice"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('69', '2026-03-02 09:22:31.9+00', 'run.state_changed', '9', '0', 'invoice', 'invoice:i-1', '', '', '0', 'engine', '', '{"to": "completed", "from": "retrying"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('70', '2026-03-02 09:24:31.9+00', 'run.created', '10', '0', 'report', '', '', '', '0', 'scheduler', '', '{"steps": 1, "run_key": "report-20m:2026-03-02T09:20:00Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('71', '2026-03-02 09:24:31.9+00', 'schedule.tick_late', '10', '0', 'report', 'schedule:report-20m', '', '', '0', 'scheduler', 'catch_up_latest', '{"tick": "2026-03-02T09:20:00Z", "policy": "latest", "late_by": "4m32s", "run_key": "report-20m:2026-03-02T09:20:00Z", "schedule": "report-20m", "timezone": "UTC"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('72', '2026-03-02 09:24:31.9+00', 'run.created', '11', '0', 'sync', 'account:a-2', '', '', '0', 'api', '', '{"steps": 1, "run_key": "sync-1"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('73', '2026-03-02 09:24:31.9+00', 'run.created', '12', '0', 'reminder', 'account:a-3', '', '', '0', 'api', '', '{"steps": 1, "run_key": "remind-1"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('74', '2026-03-02 09:24:31.9+00', 'workflow.paused', '0', '0', 'newsletter', '', '', '', '0', 'ops-desk', '', '{"note": "list under review"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('75', '2026-03-02 09:24:31.9+00', 'run.created', '13', '0', 'newsletter', 'list:l-1', '', '', '0', 'api', '', '{"steps": 1, "run_key": "issue-12"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('76', '2026-03-02 09:24:31.9+00', 'step.claimed', '10', '18', 'report', '', 'do', 'report:report-20m:2026-03-02T09:20:00Z', '1', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:25:01.9Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('77', '2026-03-02 09:24:31.9+00', 'run.state_changed', '10', '0', 'report', '', '', '', '0', 'engine', '', '{"to": "processing", "from": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('78', '2026-03-02 09:24:32+00', 'step.completed', '10', '18', 'report', '', 'do', 'report:report-20m:2026-03-02T09:20:00Z', '1', 'golden-worker', '', '{"outcome": "success", "response_status": 200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('79', '2026-03-02 09:24:32+00', 'run.state_changed', '10', '0', 'report', '', '', '', '0', 'golden-worker', '', '{"to": "completed", "from": "processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('80', '2026-03-02 09:24:32+00', 'step.claimed', '11', '19', 'sync', 'account:a-2', 'do', 'push:a-2', '1', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:25:02Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('81', '2026-03-02 09:24:32+00', 'run.state_changed', '11', '0', 'sync', 'account:a-2', '', '', '0', 'engine', '', '{"to": "processing", "from": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('82', '2026-03-02 09:24:32+00', 'step.retry_scheduled', '11', '19', 'sync', 'account:a-2', 'do', 'push:a-2', '1', 'golden-worker', 'retryable_error', '{"delay": "1h15m0s", "error": "rate limited (429)", "policy": {"max": "5m0s", "initial": "2s", "multiplier": 2, "on_failure": "needs_review", "on_unknown": "retry", "max_attempts": 6}, "backoff": "1s", "next_at": "2026-03-02T10:39:32Z", "outcome": "retryable", "retry_after": "1h15m0s"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('83', '2026-03-02 09:24:32+00', 'run.state_changed', '11', '0', 'sync', 'account:a-2', '', '', '0', 'golden-worker', '', '{"to": "retrying", "from": "processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('84', '2026-03-02 09:24:32+00', 'step.delayed', '12', '20', 'reminder', 'account:a-3', 'do', '', '0', 'engine', 'delayed', '{"wait": "1h59m59.9s", "due_at": "2026-03-02T11:24:31.9Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('85', '2026-03-02 09:44:32+00', 'run.created', '14', '0', 'report', '', '', '', '0', 'scheduler', '', '{"steps": 1, "run_key": "report-20m:2026-03-02T09:40:00Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('86', '2026-03-02 09:44:32+00', 'schedule.tick_late', '14', '0', 'report', 'schedule:report-20m', '', '', '0', 'scheduler', 'catch_up_latest', '{"tick": "2026-03-02T09:40:00Z", "policy": "latest", "late_by": "4m32s", "run_key": "report-20m:2026-03-02T09:40:00Z", "schedule": "report-20m", "timezone": "UTC"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('87', '2026-03-02 09:44:32+00', 'step.claimed', '14', '22', 'report', '', 'do', 'report:report-20m:2026-03-02T09:40:00Z', '1', 'engine', '', '{"worker": "golden-worker", "lease_expires_at": "2026-03-02T09:45:02Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('88', '2026-03-02 09:44:32+00', 'run.state_changed', '14', '0', 'report', '', '', '', '0', 'engine', '', '{"to": "processing", "from": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('89', '2026-03-02 09:44:32.1+00', 'step.completed', '14', '22', 'report', '', 'do', 'report:report-20m:2026-03-02T09:40:00Z', '1', 'golden-worker', '', '{"outcome": "success", "response_status": 200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('90', '2026-03-02 09:44:32.1+00', 'run.state_changed', '14', '0', 'report', '', '', '', '0', 'golden-worker', '', '{"to": "completed", "from": "processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('91', '2026-03-02 09:44:32.1+00', 'run.created', '15', '0', 'transfer', 'transfer:x-1', '', '', '0', 'api', '', '{"steps": 1, "run_key": "x-1"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('92', '2026-03-02 09:44:32.1+00', 'step.claimed', '15', '23', 'transfer', 'transfer:x-1', 'do', 'transfer:x-1', '1', 'engine', '', '{"worker": "vanished-worker", "lease_expires_at": "2026-03-02T09:46:02.1Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('93', '2026-03-02 09:44:32.1+00', 'run.state_changed', '15', '0', 'transfer', 'transfer:x-1', '', '', '0', 'engine', '', '{"to": "processing", "from": "pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('94', '2026-03-02 09:57:32.1+00', 'run.created', '16', '0', 'transfer', 'transfer:x-2', '', '', '0', 'api', '', '{"steps": 1, "run_key": "x-2"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('95', '2026-03-02 09:57:32.1+00', 'step.claimed', '16', '24', 'transfer', 'transfer:x-2', 'do', 'transfer:x-2', '1', 'engine', '', '{"worker": "other-worker", "lease_expires_at": "2026-03-02T10:27:32.1Z"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES ('96', '2026-03-02 09:57:32.1+00', 'run.state_changed', '16', '0', 'transfer', 'transfer:x-2', '', '', '0', 'engine', '', '{"to": "processing", "from": "pending"}');
INSERT INTO run_revisions (run_id, revision, input_before, input_after, entity_before, entity_after, diff, actor, note, at) VALUES ('7', '1', E'\\x7b22616464726573735f6f6b223a66616c73652c2270617263656c223a22732d31227d', E'\\x7b22616464726573735f6f6b223a747275652c2270617263656c223a22732d3162227d', 'parcel:s-1', 'parcel:s-1b', '{"parcel": "s-1b", "address_ok": true}', 'ops-desk', 'parcel relabelled', '2026-03-02 09:21:00.7+00');
INSERT INTO workflow_pauses (workflow, paused_at, actor, note) VALUES ('newsletter', '2026-03-02 09:24:31.9+00', 'ops-desk', 'list under review');
INSERT INTO schedules (name, through, last_tick, last_run_id, updated_at) VALUES ('report-20m', '2026-03-02 09:40:00+00', '2026-03-02 09:40:00+00', '14', '2026-03-02 09:44:32+00');
SELECT setval('attempts_id_seq', 18, true);
SELECT setval('events_id_seq', 96, true);
SELECT setval('incidents_id_seq', 1, false);
SELECT setval('runs_id_seq', 16, true);
SELECT setval('steps_id_seq', 24, true);

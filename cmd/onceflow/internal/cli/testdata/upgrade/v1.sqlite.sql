-- onceflow upgrade fixture v1 (sqlite): the schema and rows of a database in which auditgolden.BuildEveryState
-- left runs in every state, written by the store as of commit 885bfd4dcdac326999e4380958e74e470fbd5ba7.
-- TestUpgradeInPlace loads it into an empty database and lets the current code migrate and finish it.
-- Rebuilt only by go test ./cmd/onceflow/internal/cli -run TestUpgradeInPlace -update-fixture,
-- on a commit whose migrations are the ones below; never edit it by hand.

-- schema_migrations, as the store creates it
CREATE TABLE schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
);

-- migration 0001_initial.sql
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

-- migration 0002_leaders.sql
-- Leaders: one lease per duty (e.g. the lease reaper) so that one process among many runs it.
CREATE TABLE leaders (
    name       TEXT    PRIMARY KEY,
    owner      TEXT    NOT NULL,
    elected_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);

-- migration 0003_entities.sql
-- Entities: business objects with a guarded state, changed only by compare-and-set.
CREATE TABLE entities (
    entity_key TEXT    PRIMARY KEY,
    state      TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    run_id     INTEGER NOT NULL,
    effect_key TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);

-- Every applied transition, keyed by the effect key that applied it.
CREATE TABLE entity_transitions (
    effect_key TEXT    PRIMARY KEY,
    entity_key TEXT    NOT NULL,
    from_state TEXT    NOT NULL,
    to_state   TEXT    NOT NULL,
    run_id     INTEGER NOT NULL,
    step_id    INTEGER NOT NULL,
    at         INTEGER NOT NULL
);
CREATE INDEX entity_transitions_entity ON entity_transitions (entity_key, at);

-- migration 0004_review.sql
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

-- migration 0005_retention.sql
-- Retention: a completed ledger row may be purged from retain_until on (microseconds since
-- the Unix epoch). 0 keeps it forever, as every row written before this migration is kept.
ALTER TABLE effects ADD COLUMN retain_until INTEGER NOT NULL DEFAULT 0;
CREATE INDEX effects_retain_until ON effects (retain_until) WHERE retain_until > 0;

-- The purge walks finished runs by the time they last changed, oldest first.
CREATE INDEX runs_finished ON runs (updated_at, id) WHERE state IN ('completed', 'failed', 'cancelled');

-- migration 0006_notifications.sql
-- Incidents of failure notifications: the review events of one kind (policy, workflow, step,
-- reason) within a window after the first one, announced once and digested when the window
-- ends. Times are microseconds since the Unix epoch; 0 means not yet.
CREATE TABLE incidents (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    policy         TEXT    NOT NULL,
    workflow       TEXT    NOT NULL,
    step_name      TEXT    NOT NULL,
    reason         TEXT    NOT NULL,
    opened_at      INTEGER NOT NULL,
    ends_at        INTEGER NOT NULL,
    count          INTEGER NOT NULL CHECK (count >= 1),
    first          TEXT    NOT NULL,               -- JSON: the event that opened it
    repeats        TEXT    NOT NULL DEFAULT '[]',  -- JSON: the first few repeats
    first_event_id INTEGER NOT NULL,
    last_event_id  INTEGER NOT NULL,
    last_at        INTEGER NOT NULL,
    alerted_at     INTEGER NOT NULL DEFAULT 0,
    closed_at      INTEGER NOT NULL DEFAULT 0,
    -- An event opens at most one incident per policy.
    UNIQUE (policy, first_event_id)
);
CREATE INDEX incidents_open ON incidents (policy, workflow, step_name, reason, id) WHERE closed_at = 0;
CREATE INDEX incidents_due ON incidents (id) WHERE closed_at = 0;

-- Where a reader of the audit trail (the notifier) has read up to: an event ID.
CREATE TABLE incident_cursors (
    name       TEXT    PRIMARY KEY,
    position   INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

-- migration 0007_controls.sql
-- Operators' controls over execution. The attempts of steps cancelled while they ran are
-- reaped like any other when their worker vanished.
CREATE INDEX steps_cancelled_lease ON steps (lease_expires_at) WHERE state = 'cancelled' AND lease_owner <> '';

-- A paused workflow keeps accepting runs; engines do
-- not claim its steps. Times are microseconds since the Unix epoch.
CREATE TABLE workflow_pauses (
    workflow  TEXT    PRIMARY KEY,
    paused_at INTEGER NOT NULL,
    actor     TEXT    NOT NULL,
    note      TEXT    NOT NULL DEFAULT ''
);

-- migration 0008_schedules.sql
-- Schedules: how far each schedule has fired its ticks, so that a restart or a new leader
-- neither repeats nor loses one.
CREATE TABLE schedules (
    name        TEXT    PRIMARY KEY,
    through     INTEGER NOT NULL,
    last_tick   INTEGER NOT NULL DEFAULT 0,
    last_run_id INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL
);

-- migration 0009_step_progress.sql
-- The latest checkpoint of a long step (store.StepCheckpointer), JSON: the attempts after
-- it go on from there.
ALTER TABLE steps ADD COLUMN progress BLOB;

-- rows
INSERT INTO schema_migrations (version, name, applied_at) VALUES (1, 'initial', 1796138173499111);
INSERT INTO schema_migrations (version, name, applied_at) VALUES (2, 'leaders', 1796138173519470);
INSERT INTO schema_migrations (version, name, applied_at) VALUES (3, 'entities', 1796138173521097);
INSERT INTO schema_migrations (version, name, applied_at) VALUES (4, 'review', 1796138173522910);
INSERT INTO schema_migrations (version, name, applied_at) VALUES (5, 'retention', 1796138173525567);
INSERT INTO schema_migrations (version, name, applied_at) VALUES (6, 'notifications', 1796138173526814);
INSERT INTO schema_migrations (version, name, applied_at) VALUES (7, 'controls', 1796138173527915);
INSERT INTO schema_migrations (version, name, applied_at) VALUES (8, 'schedules', 1796138173528838);
INSERT INTO schema_migrations (version, name, applied_at) VALUES (9, 'step_progress', 1796138173529734);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (2, 'orders', 'order-1', 'order:o-1', X'7B226F72646572223A226F2D31227D', 'be2472c17de3278dba7def61413162208d6766b87b68049b98e4f97259dd70f5', 'completed', 1772443200100000, 1772443200700000);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (3, 'trial', 'trial-1', 'account:a-1', X'7B226163636F756E74223A22612D31227D', '39e3d7cc6ee3b278e6f23f6bc2af9f9db07dc14e85110ee6f708ae11c89542b1', 'pending', 1772443200100000, 1772443200600000);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (4, 'export', 'export-1', 'export:e-1', X'7B226578706F7274223A22652D31227D', '547fbbee7fed31417c8361fed781ab524a1ced286c6aff45362e7ee0398da798', 'failed', 1772443200100000, 1772443200300000);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (5, 'refund', 'refund-1', 'refund:r-1', X'7B22726566756E64223A22722D31227D', '36ec133fccfa58ca53d5fe526faccfc8349635f22eda6da1060e8cde2c2dbefe', 'cancelled', 1772443200100000, 1772443200100000);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (6, 'payment', 'payment-1', 'payment:p-1', X'7B227061796D656E74223A22702D31227D', '8c07ecbd1b241603bf7722f82fb98be944b4b8c588f96135a3af0fc53b0c0bb7', 'needs_review', 1772443200100000, 1772443200300000);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (7, 'shipment', 'ship-1', 'parcel:s-1b', X'7B22616464726573735F6F6B223A747275652C2270617263656C223A22732D3162227D', '8181eebf642428a9ad63602ffd243908a2a3a9ee3e87d9f1f2673f56782ae821', 'completed', 1772443200100000, 1772443260800000);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (8, 'shipment', 'ship-2', 'parcel:s-2', X'7B22616464726573735F6F6B223A66616C73652C2270617263656C223A22732D32227D', '9a97d7516e4b1db88b77d764becd3e2b797aa3cfaae673250042abeb17c3404c', 'needs_review', 1772443200100000, 1772443200600000);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (9, 'invoice', 'inv-late', 'invoice:i-1', X'7B22696E766F696365223A22692D31227D', '0d6e388d489f97ceb8d34098f76aaebf4a1e2a6bfc1fce164bd8b13bcc61377e', 'completed', 1772443320800000, 1772443351900000);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (10, 'report', 'report-20m:2026-03-02T09:20:00Z', '', X'7B227363686564756C65223A7B226E616D65223A227265706F72742D32306D222C22706572696F64223A22323032362D30332D30325430393A3230222C2270726576696F7573223A22323032362D30332D30325430393A30303A30305A222C2274696D65223A22323032362D30332D30325430393A32303A30305A227D7D', 'cb154d50308fb320150094191f3e951e52a64ef40d7ce9661cf884ea921bdb97', 'completed', 1772443471900000, 1772443472000000);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (11, 'sync', 'sync-1', 'account:a-2', X'7B226163636F756E74223A22612D32227D', '95d2df0d2c7f941cee9813a10aeb2fa6c14df01c863d06d45d5fac7f69b4f1dd', 'retrying', 1772443471900000, 1772443472000000);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (12, 'reminder', 'remind-1', 'account:a-3', X'7B226163636F756E74223A22612D33227D', '5876825d1bb1ef7996d09f350b8eb6ec16c1b2d61ab1b7af76f8c46dbf8cb987', 'pending', 1772443471900000, 1772443471900000);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (13, 'newsletter', 'issue-12', 'list:l-1', X'7B226973737565223A31322C226C697374223A226C2D31227D', '8b4707a93b6155a83e3e0776e906275299321ca972fc40a086709262292760b2', 'pending', 1772443471900000, 1772443471900000);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (14, 'report', 'report-20m:2026-03-02T09:40:00Z', '', X'7B227363686564756C65223A7B226E616D65223A227265706F72742D32306D222C22706572696F64223A22323032362D30332D30325430393A3430222C2270726576696F7573223A22323032362D30332D30325430393A32303A30305A222C2274696D65223A22323032362D30332D30325430393A34303A30305A227D7D', '12a2ad9a2fa3a4bfeb1a9cb11f3c89dc51a915975abf287a89cd15094c434a86', 'completed', 1772444672000000, 1772444672100000);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (15, 'transfer', 'x-1', 'transfer:x-1', X'7B227472616E73666572223A22782D31227D', '441bf371a2406515bdf2f9a47893da61b889bfe57b120bef3210808d62a5090e', 'processing', 1772444672100000, 1772444672100000);
INSERT INTO runs (id, workflow, run_key, entity, input, input_hash, state, created_at, updated_at) VALUES (16, 'transfer', 'x-2', 'transfer:x-2', X'7B227472616E73666572223A22782D32227D', '596badd605d45c4b35bfb0c5315c16c8a8b547e114da095bbfce2c64eda9ead0', 'processing', 1772445452100000, 1772445452100000);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (2, 2, 'orders', 'reserve', '[]', 0, 'completed', 'reserve:o-1', '', 1, 1772443200200000, '', 0, 'success', X'7B22646F6E65223A22726573657276653A6F2D31227D', '', '', 1772443200100000, 1772443200200000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (3, 2, 'orders', 'charge', '["reserve"]', 0, 'completed', 'charge:o-1', '', 1, 1772443200600000, '', 0, 'success', X'7B22646F6E65223A226368617267653A6F2D31227D', '', '', 1772443200100000, 1772443200600000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (4, 2, 'orders', 'notify', '["charge"]', 0, 'completed', 'notify:o-1', '', 1, 1772443200700000, '', 0, 'success', X'7B22646F6E65223A226E6F746966793A6F2D31227D', '', '', 1772443200100000, 1772443200700000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (5, 3, 'trial', 'welcome', '[]', 0, 'completed', 'welcome:a-1', '', 1, 1772443200300000, '', 0, 'success', X'7B22646F6E65223A2277656C636F6D653A612D31227D', '', '', 1772443200100000, 1772443200300000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (6, 3, 'trial', 'upsell', '["welcome"]', 0, 'skipped', '', '', 0, 1772443200300000, '', 0, '', NULL, '', 'condition_false', 1772443200100000, 1772443200600000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (7, 3, 'trial', 'nudge', '["welcome"]', 0, 'pending', '', '', 0, 1772448600300000, '', 0, '', NULL, '', 'delayed', 1772443200100000, 1772443200600000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (8, 4, 'export', 'upload', '[]', 0, 'failed', 'upload:e-1', '', 1, 1772443200300000, '', 0, 'permanent', NULL, 'bucket not found (404)', 'permanent_error', 1772443200100000, 1772443200300000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (9, 4, 'export', 'announce', '["upload"]', 1, 'cancelled', '', '', 0, 1772443200100000, '', 0, '', NULL, '', 'dependency_failed', 1772443200100000, 1772443200300000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (10, 5, 'refund', 'approve', '[]', 0, 'cancelled', '', '', 0, 1772443200100000, '', 0, '', NULL, '', 'run_cancelled', 1772443200100000, 1772443200100000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (11, 5, 'refund', 'pay', '["approve"]', 1, 'cancelled', '', '', 0, 1772443200100000, '', 0, '', NULL, '', 'run_cancelled', 1772443200100000, 1772443200100000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (12, 6, 'payment', 'do', '[]', 0, 'needs_review', 'capture:p-1', '', 1, 1772443200300000, '', 0, 'unknown', NULL, 'connection reset after the request was sent', 'outcome_unknown', 1772443200100000, 1772443200300000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (13, 7, 'shipment', 'label', '[]', 0, 'completed', 'label:s-1', '', 1, 1772443200400000, '', 0, 'success', X'7B22646F6E65223A226C6162656C3A732D31227D', '', '', 1772443200100000, 1772443200400000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (14, 7, 'shipment', 'dispatch', '["label"]', 0, 'completed', 'dispatch:s-1b', '', 2, 1772443260800000, '', 0, 'success', X'7B22646F6E65223A2264697370617463683A732D3162227D', '', '', 1772443200100000, 1772443260800000, 1, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (15, 8, 'shipment', 'label', '[]', 0, 'completed', 'label:s-2', '', 1, 1772443200500000, '', 0, 'success', X'7B22646F6E65223A226C6162656C3A732D32227D', '', '', 1772443200100000, 1772443200500000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (16, 8, 'shipment', 'dispatch', '["label"]', 0, 'needs_review', 'dispatch:s-2', '', 1, 1772443200600000, '', 0, 'permanent', NULL, 'carrier refused the address (422)', 'permanent_error', 1772443200100000, 1772443200600000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (17, 9, 'invoice', 'do', '[]', 0, 'completed', 'send:i-1', '', 1, 1772443351800000, '', 0, 'unknown', X'7B22646F6E65223A2273656E643A692D31227D', 'lease held by "golden-worker" expired at 2026-03-02T09:22:30.8Z without a result; the outcome is unknown', 'effect_reused', 1772443320800000, 1772443351900000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (18, 10, 'report', 'do', '[]', 0, 'completed', 'report:report-20m:2026-03-02T09:20:00Z', '', 1, 1772443472000000, '', 0, 'success', X'7B22646F6E65223A227265706F72743A7265706F72742D32306D3A323032362D30332D30325430393A32303A30305A227D', '', '', 1772443471900000, 1772443472000000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (19, 11, 'sync', 'do', '[]', 0, 'retrying', 'push:a-2', '', 1, 1772447972000000, '', 0, 'retryable', NULL, 'rate limited (429)', 'retryable_error', 1772443471900000, 1772443472000000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (20, 12, 'reminder', 'do', '[]', 0, 'pending', '', '', 0, 1772450671900000, '', 0, '', NULL, '', 'delayed', 1772443471900000, 1772443472000000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (21, 13, 'newsletter', 'do', '[]', 0, 'pending', '', '', 0, 1772443471900000, '', 0, '', NULL, '', '', 1772443471900000, 1772443471900000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (22, 14, 'report', 'do', '[]', 0, 'completed', 'report:report-20m:2026-03-02T09:40:00Z', '', 1, 1772444672100000, '', 0, 'success', X'7B22646F6E65223A227265706F72743A7265706F72742D32306D3A323032362D30332D30325430393A34303A30305A227D', '', '', 1772444672000000, 1772444672100000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (23, 15, 'transfer', 'do', '[]', 0, 'processing', 'transfer:x-1', '', 1, 1772444672100000, 'vanished-worker', 1772444762100000, '', NULL, '', '', 1772444672100000, 1772444672100000, 0, NULL);
INSERT INTO steps (id, run_id, workflow, name, needs, waiting, state, effect_key, fingerprint, attempt, next_at, lease_owner, lease_expires_at, last_outcome, output, last_error, reason, created_at, updated_at, attempt_base, progress) VALUES (24, 16, 'transfer', 'do', '[]', 0, 'processing', 'transfer:x-2', '', 1, 1772445452100000, 'other-worker', 1772447252100000, '', NULL, '', '', 1772445452100000, 1772445452100000, 0, NULL);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('digest:t-1:2026-W09', 'completed', '', X'7B22646F6E65223A226469676573743A742D313A323032362D573039227D', 1, 1, 'digest', 'do', 1772442000000000, 1772442000100000, 0);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('reserve:o-1', 'completed', '', X'7B22646F6E65223A22726573657276653A6F2D31227D', 2, 2, 'orders', 'reserve', 1772443200100000, 1772443200200000, 0);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('welcome:a-1', 'completed', '', X'7B22646F6E65223A2277656C636F6D653A612D31227D', 3, 5, 'trial', 'welcome', 1772443200200000, 1772443200300000, 0);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('capture:p-1', 'in_flight', '', NULL, 6, 12, 'payment', 'do', 1772443200300000, 0, 0);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('label:s-1', 'completed', '', X'7B22646F6E65223A226C6162656C3A732D31227D', 7, 13, 'shipment', 'label', 1772443200300000, 1772443200400000, 0);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('label:s-2', 'completed', '', X'7B22646F6E65223A226C6162656C3A732D32227D', 8, 15, 'shipment', 'label', 1772443200400000, 1772443200500000, 0);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('charge:o-1', 'completed', '', X'7B22646F6E65223A226368617267653A6F2D31227D', 2, 3, 'orders', 'charge', 1772443200500000, 1772443200600000, 0);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('notify:o-1', 'completed', '', X'7B22646F6E65223A226E6F746966793A6F2D31227D', 2, 4, 'orders', 'notify', 1772443200600000, 1772443200700000, 0);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('dispatch:s-1b', 'completed', '', X'7B22646F6E65223A2264697370617463683A732D3162227D', 7, 14, 'shipment', 'dispatch', 1772443260700000, 1772443260800000, 0);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('send:i-1', 'completed', '', X'7B22646F6E65223A2273656E643A692D31227D', 9, 17, 'invoice', 'do', 1772443320800000, 1772443351900000, 0);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('report:report-20m:2026-03-02T09:20:00Z', 'completed', '', X'7B22646F6E65223A227265706F72743A7265706F72742D32306D3A323032362D30332D30325430393A32303A30305A227D', 10, 18, 'report', 'do', 1772443471900000, 1772443472000000, 0);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('push:a-2', 'in_flight', '', NULL, 11, 19, 'sync', 'do', 1772443472000000, 0, 0);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('report:report-20m:2026-03-02T09:40:00Z', 'completed', '', X'7B22646F6E65223A227265706F72743A7265706F72742D32306D3A323032362D30332D30325430393A34303A30305A227D', 14, 22, 'report', 'do', 1772444672000000, 1772444672100000, 0);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('transfer:x-1', 'in_flight', '', NULL, 15, 23, 'transfer', 'do', 1772444672100000, 0, 0);
INSERT INTO effects (effect_key, state, fingerprint, result, run_id, step_id, workflow, step_name, created_at, completed_at, retain_until) VALUES ('transfer:x-2', 'in_flight', '', NULL, 16, 24, 'transfer', 'do', 1772445452100000, 0, 0);
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (2, 2, 2, 'reserve', 1, 'reserve:o-1', 'golden-worker', 1772443200100000, 1772443200200000, 'success', '', 200, 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (3, 3, 5, 'welcome', 1, 'welcome:a-1', 'golden-worker', 1772443200200000, 1772443200300000, 'success', '', 200, 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (4, 4, 8, 'upload', 1, 'upload:e-1', 'golden-worker', 1772443200300000, 1772443200300000, 'permanent', 'bucket not found (404)', 0, '');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (5, 6, 12, 'do', 1, 'capture:p-1', 'golden-worker', 1772443200300000, 1772443200300000, 'unknown', 'connection reset after the request was sent', 0, '');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (6, 7, 13, 'label', 1, 'label:s-1', 'golden-worker', 1772443200300000, 1772443200400000, 'success', '', 200, 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (7, 8, 15, 'label', 1, 'label:s-2', 'golden-worker', 1772443200400000, 1772443200500000, 'success', '', 200, 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (8, 2, 3, 'charge', 1, 'charge:o-1', 'golden-worker', 1772443200500000, 1772443200600000, 'success', '', 200, 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (9, 7, 14, 'dispatch', 1, 'dispatch:s-1', 'golden-worker', 1772443200600000, 1772443200600000, 'permanent', 'carrier refused the address (422)', 0, '');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (10, 8, 16, 'dispatch', 1, 'dispatch:s-2', 'golden-worker', 1772443200600000, 1772443200600000, 'permanent', 'carrier refused the address (422)', 0, '');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (11, 2, 4, 'notify', 1, 'notify:o-1', 'golden-worker', 1772443200600000, 1772443200700000, 'success', '', 200, 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (12, 7, 14, 'dispatch', 2, 'dispatch:s-1b', 'golden-worker', 1772443260700000, 1772443260800000, 'success', '', 200, 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (13, 9, 17, 'do', 1, 'send:i-1', 'golden-worker', 1772443320800000, 1772443351900000, 'success', '', 200, 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (14, 10, 18, 'do', 1, 'report:report-20m:2026-03-02T09:20:00Z', 'golden-worker', 1772443471900000, 1772443472000000, 'success', '', 200, 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (15, 11, 19, 'do', 1, 'push:a-2', 'golden-worker', 1772443472000000, 1772443472000000, 'retryable', 'rate limited (429)', 0, '');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (16, 14, 22, 'do', 1, 'report:report-20m:2026-03-02T09:40:00Z', 'golden-worker', 1772444672000000, 1772444672100000, 'success', '', 200, 'ok');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (17, 15, 23, 'do', 1, 'transfer:x-1', 'vanished-worker', 1772444672100000, 0, '', '', 0, '');
INSERT INTO attempts (id, run_id, step_id, step_name, number, effect_key, worker, started_at, ended_at, outcome, error, response_status, response_excerpt) VALUES (18, 16, 24, 'do', 1, 'transfer:x-2', 'other-worker', 1772445452100000, 0, '', '', 0, '');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (6, 1772443200100000, 'retention.purged', 0, 0, '', '', '', '', 0, 'retention-job', '', '{"attempts":1,"batch":1,"effects":0,"events":5,"now":"2026-03-02T09:20:00.1Z","runs":1,"runs_before":"2026-03-02T09:10:00.1Z","steps":1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (7, 1772443200100000, 'run.created', 2, 0, 'orders', 'order:o-1', '', '', 0, 'api', '', '{"run_key":"order-1","steps":3}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (8, 1772443200100000, 'run.created', 3, 0, 'trial', 'account:a-1', '', '', 0, 'api', '', '{"run_key":"trial-1","steps":3}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (9, 1772443200100000, 'run.created', 4, 0, 'export', 'export:e-1', '', '', 0, 'api', '', '{"run_key":"export-1","steps":2}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (10, 1772443200100000, 'run.created', 5, 0, 'refund', 'refund:r-1', '', '', 0, 'api', '', '{"run_key":"refund-1","steps":2}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (11, 1772443200100000, 'step.cancelled', 5, 10, 'refund', 'refund:r-1', 'approve', '', 0, 'ops-desk', 'run_cancelled', '{"key_held":false,"note":"request withdrawn","previous_state":"pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (12, 1772443200100000, 'step.cancelled', 5, 11, 'refund', 'refund:r-1', 'pay', '', 0, 'ops-desk', 'run_cancelled', '{"key_held":false,"note":"request withdrawn","previous_state":"pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (13, 1772443200100000, 'run.cancelled', 5, 0, 'refund', 'refund:r-1', '', '', 0, 'ops-desk', 'run_cancelled', '{"cancelled":["approve","pay"],"note":"request withdrawn","previous_state":"pending","running":[]}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (14, 1772443200100000, 'run.state_changed', 5, 0, 'refund', 'refund:r-1', '', '', 0, 'ops-desk', '', '{"from":"pending","to":"cancelled"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (15, 1772443200100000, 'run.created', 6, 0, 'payment', 'payment:p-1', '', '', 0, 'api', '', '{"run_key":"payment-1","steps":1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (16, 1772443200100000, 'run.created', 7, 0, 'shipment', 'parcel:s-1', '', '', 0, 'api', '', '{"run_key":"ship-1","steps":2}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (17, 1772443200100000, 'run.created', 8, 0, 'shipment', 'parcel:s-2', '', '', 0, 'api', '', '{"run_key":"ship-2","steps":2}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (18, 1772443200100000, 'step.claimed', 2, 2, 'orders', 'order:o-1', 'reserve', 'reserve:o-1', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:20:30.1Z","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (19, 1772443200100000, 'run.state_changed', 2, 0, 'orders', 'order:o-1', '', '', 0, 'engine', '', '{"from":"pending","to":"processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (20, 1772443200200000, 'step.completed', 2, 2, 'orders', 'order:o-1', 'reserve', 'reserve:o-1', 1, 'golden-worker', '', '{"outcome":"success","response_status":200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (21, 1772443200200000, 'step.claimed', 3, 5, 'trial', 'account:a-1', 'welcome', 'welcome:a-1', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:20:30.2Z","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (22, 1772443200200000, 'run.state_changed', 3, 0, 'trial', 'account:a-1', '', '', 0, 'engine', '', '{"from":"pending","to":"processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (23, 1772443200300000, 'step.completed', 3, 5, 'trial', 'account:a-1', 'welcome', 'welcome:a-1', 1, 'golden-worker', '', '{"outcome":"success","response_status":200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (24, 1772443200300000, 'step.claimed', 4, 8, 'export', 'export:e-1', 'upload', 'upload:e-1', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:20:30.3Z","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (25, 1772443200300000, 'run.state_changed', 4, 0, 'export', 'export:e-1', '', '', 0, 'engine', '', '{"from":"pending","to":"processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (26, 1772443200300000, 'step.failed', 4, 8, 'export', 'export:e-1', 'upload', 'upload:e-1', 1, 'golden-worker', 'permanent_error', '{"error":"bucket not found (404)","outcome":"permanent","policy":{"initial":"2s","max":"5m0s","max_attempts":6,"multiplier":2,"on_failure":"fail","on_unknown":"retry"}}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (27, 1772443200300000, 'step.cancelled', 4, 9, 'export', 'export:e-1', 'announce', '', 0, 'engine', 'dependency_failed', '{}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (28, 1772443200300000, 'run.state_changed', 4, 0, 'export', 'export:e-1', '', '', 0, 'golden-worker', '', '{"from":"processing","to":"failed"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (29, 1772443200300000, 'step.claimed', 6, 12, 'payment', 'payment:p-1', 'do', 'capture:p-1', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:20:30.3Z","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (30, 1772443200300000, 'run.state_changed', 6, 0, 'payment', 'payment:p-1', '', '', 0, 'engine', '', '{"from":"pending","to":"processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (31, 1772443200300000, 'step.needs_review', 6, 12, 'payment', 'payment:p-1', 'do', 'capture:p-1', 1, 'golden-worker', 'outcome_unknown', '{"error":"connection reset after the request was sent","outcome":"unknown","policy":{"initial":"2s","max":"5m0s","max_attempts":6,"multiplier":2,"on_failure":"needs_review","on_unknown":"needs_review"}}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (32, 1772443200300000, 'run.state_changed', 6, 0, 'payment', 'payment:p-1', '', '', 0, 'golden-worker', '', '{"from":"processing","to":"needs_review"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (33, 1772443200300000, 'step.claimed', 7, 13, 'shipment', 'parcel:s-1', 'label', 'label:s-1', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:20:30.3Z","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (34, 1772443200300000, 'run.state_changed', 7, 0, 'shipment', 'parcel:s-1', '', '', 0, 'engine', '', '{"from":"pending","to":"processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (35, 1772443200400000, 'step.completed', 7, 13, 'shipment', 'parcel:s-1', 'label', 'label:s-1', 1, 'golden-worker', '', '{"outcome":"success","response_status":200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (36, 1772443200400000, 'step.claimed', 8, 15, 'shipment', 'parcel:s-2', 'label', 'label:s-2', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:20:30.4Z","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (37, 1772443200400000, 'run.state_changed', 8, 0, 'shipment', 'parcel:s-2', '', '', 0, 'engine', '', '{"from":"pending","to":"processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (38, 1772443200500000, 'step.completed', 8, 15, 'shipment', 'parcel:s-2', 'label', 'label:s-2', 1, 'golden-worker', '', '{"outcome":"success","response_status":200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (39, 1772443200500000, 'step.claimed', 2, 3, 'orders', 'order:o-1', 'charge', 'charge:o-1', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:20:30.5Z","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (40, 1772443200600000, 'step.completed', 2, 3, 'orders', 'order:o-1', 'charge', 'charge:o-1', 1, 'golden-worker', '', '{"outcome":"success","response_status":200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (41, 1772443200600000, 'step.skipped', 3, 6, 'trial', 'account:a-1', 'upsell', '', 0, 'engine', 'condition_false', '{}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (42, 1772443200600000, 'step.delayed', 3, 7, 'trial', 'account:a-1', 'nudge', '', 0, 'engine', 'delayed', '{"due_at":"2026-03-02T10:50:00.3Z","wait":"1h29m59.7s"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (43, 1772443200600000, 'run.state_changed', 3, 0, 'trial', 'account:a-1', '', '', 0, 'engine', '', '{"from":"processing","to":"pending"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (44, 1772443200600000, 'step.claimed', 7, 14, 'shipment', 'parcel:s-1', 'dispatch', 'dispatch:s-1', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:20:30.6Z","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (45, 1772443200600000, 'step.needs_review', 7, 14, 'shipment', 'parcel:s-1', 'dispatch', 'dispatch:s-1', 1, 'golden-worker', 'permanent_error', '{"error":"carrier refused the address (422)","outcome":"permanent","policy":{"initial":"2s","max":"5m0s","max_attempts":6,"multiplier":2,"on_failure":"needs_review","on_unknown":"retry"}}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (46, 1772443200600000, 'run.state_changed', 7, 0, 'shipment', 'parcel:s-1', '', '', 0, 'golden-worker', '', '{"from":"processing","to":"needs_review"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (47, 1772443200600000, 'step.claimed', 8, 16, 'shipment', 'parcel:s-2', 'dispatch', 'dispatch:s-2', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:20:30.6Z","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (48, 1772443200600000, 'step.needs_review', 8, 16, 'shipment', 'parcel:s-2', 'dispatch', 'dispatch:s-2', 1, 'golden-worker', 'permanent_error', '{"error":"carrier refused the address (422)","outcome":"permanent","policy":{"initial":"2s","max":"5m0s","max_attempts":6,"multiplier":2,"on_failure":"needs_review","on_unknown":"retry"}}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (49, 1772443200600000, 'run.state_changed', 8, 0, 'shipment', 'parcel:s-2', '', '', 0, 'golden-worker', '', '{"from":"processing","to":"needs_review"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (50, 1772443200600000, 'step.claimed', 2, 4, 'orders', 'order:o-1', 'notify', 'notify:o-1', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:20:30.6Z","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (51, 1772443200700000, 'step.completed', 2, 4, 'orders', 'order:o-1', 'notify', 'notify:o-1', 1, 'golden-worker', '', '{"outcome":"success","response_status":200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (52, 1772443200700000, 'run.state_changed', 2, 0, 'orders', 'order:o-1', '', '', 0, 'golden-worker', '', '{"from":"processing","to":"completed"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (53, 1772443260700000, 'run.input_corrected', 7, 0, 'shipment', 'parcel:s-1b', '', '', 0, 'ops-desk', 'correction', '{"entity_after":"parcel:s-1b","entity_before":"parcel:s-1","fields":["address_ok","parcel"],"note":"parcel relabelled","revision":1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (54, 1772443260700000, 'review.replayed', 7, 14, 'shipment', 'parcel:s-1b', 'dispatch', 'dispatch:s-1', 1, 'ops-desk', 'replay', '{"last_error":"carrier refused the address (422)","note":"parcel relabelled","previous_reason":"permanent_error","previous_state":"needs_review","revision":1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (55, 1772443260700000, 'run.state_changed', 7, 0, 'shipment', 'parcel:s-1b', '', '', 0, 'ops-desk', '', '{"from":"needs_review","to":"processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (56, 1772443260700000, 'step.claimed', 7, 14, 'shipment', 'parcel:s-1b', 'dispatch', 'dispatch:s-1b', 2, 'engine', '', '{"lease_expires_at":"2026-03-02T09:21:30.7Z","previous_outcome":"permanent","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (57, 1772443260800000, 'step.completed', 7, 14, 'shipment', 'parcel:s-1b', 'dispatch', 'dispatch:s-1b', 2, 'golden-worker', '', '{"outcome":"success","response_status":200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (58, 1772443260800000, 'run.state_changed', 7, 0, 'shipment', 'parcel:s-1b', '', '', 0, 'golden-worker', '', '{"from":"processing","to":"completed"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (59, 1772443320800000, 'run.created', 9, 0, 'invoice', 'invoice:i-1', '', '', 0, 'api', '', '{"run_key":"inv-late","steps":1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (60, 1772443320800000, 'step.claimed', 9, 17, 'invoice', 'invoice:i-1', 'do', 'send:i-1', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:22:30.8Z","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (61, 1772443320800000, 'run.state_changed', 9, 0, 'invoice', 'invoice:i-1', '', '', 0, 'engine', '', '{"from":"pending","to":"processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (62, 1772443351800000, 'lease.expired', 9, 17, 'invoice', 'invoice:i-1', 'do', 'send:i-1', 1, 'reaper', 'lease_expired', '{"lease_expired_at":"2026-03-02T09:22:30.8Z","owner":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (63, 1772443351800000, 'step.retry_scheduled', 9, 17, 'invoice', 'invoice:i-1', 'do', 'send:i-1', 1, 'reaper', 'lease_expired', '{"next_at":"2026-03-02T09:22:31.8Z","outcome":"unknown","policy":{"max_attempts":6,"on_unknown":"retry"},"why":"retry with the same effect key; the destination deduplicates"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (64, 1772443351800000, 'run.state_changed', 9, 0, 'invoice', 'invoice:i-1', '', '', 0, 'reaper', '', '{"from":"processing","to":"retrying"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (65, 1772443351900000, 'lease.lost', 9, 17, 'invoice', 'invoice:i-1', 'do', 'send:i-1', 1, 'golden-worker', '', '{"attempt":1,"outcome":"success","owner":"golden-worker","step_attempt":1,"step_owner":"","step_state":"retrying"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (66, 1772443351900000, 'lease.lost_result_kept', 9, 17, 'invoice', 'invoice:i-1', 'do', 'send:i-1', 1, 'golden-worker', '', '{"attempt":1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (67, 1772443351900000, 'effect.reused', 9, 17, 'invoice', 'invoice:i-1', 'do', 'send:i-1', 1, 'engine', 'effect_completed', '{"completed_at":"2026-03-02T09:22:31.9Z","completed_by_run":9,"completed_by_step":"do","completed_by_workflow":"invoice"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (68, 1772443351900000, 'step.completed', 9, 17, 'invoice', 'invoice:i-1', 'do', 'send:i-1', 1, 'engine', 'effect_reused', '{"completed_at":"2026-03-02T09:22:31.9Z","completed_by_run":9,"completed_by_step":"do","completed_by_workflow":"invoice"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (69, 1772443351900000, 'run.state_changed', 9, 0, 'invoice', 'invoice:i-1', '', '', 0, 'engine', '', '{"from":"retrying","to":"completed"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (70, 1772443471900000, 'run.created', 10, 0, 'report', '', '', '', 0, 'scheduler', '', '{"run_key":"report-20m:2026-03-02T09:20:00Z","steps":1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (71, 1772443471900000, 'schedule.tick_late', 10, 0, 'report', 'schedule:report-20m', '', '', 0, 'scheduler', 'catch_up_latest', '{"late_by":"4m32s","policy":"latest","run_key":"report-20m:2026-03-02T09:20:00Z","schedule":"report-20m","tick":"2026-03-02T09:20:00Z","timezone":"UTC"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (72, 1772443471900000, 'run.created', 11, 0, 'sync', 'account:a-2', '', '', 0, 'api', '', '{"run_key":"sync-1","steps":1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (73, 1772443471900000, 'run.created', 12, 0, 'reminder', 'account:a-3', '', '', 0, 'api', '', '{"run_key":"remind-1","steps":1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (74, 1772443471900000, 'workflow.paused', 0, 0, 'newsletter', '', '', '', 0, 'ops-desk', '', '{"note":"list under review"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (75, 1772443471900000, 'run.created', 13, 0, 'newsletter', 'list:l-1', '', '', 0, 'api', '', '{"run_key":"issue-12","steps":1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (76, 1772443471900000, 'step.claimed', 10, 18, 'report', '', 'do', 'report:report-20m:2026-03-02T09:20:00Z', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:25:01.9Z","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (77, 1772443471900000, 'run.state_changed', 10, 0, 'report', '', '', '', 0, 'engine', '', '{"from":"pending","to":"processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (78, 1772443472000000, 'step.completed', 10, 18, 'report', '', 'do', 'report:report-20m:2026-03-02T09:20:00Z', 1, 'golden-worker', '', '{"outcome":"success","response_status":200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (79, 1772443472000000, 'run.state_changed', 10, 0, 'report', '', '', '', 0, 'golden-worker', '', '{"from":"processing","to":"completed"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (80, 1772443472000000, 'step.claimed', 11, 19, 'sync', 'account:a-2', 'do', 'push:a-2', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:25:02Z","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (81, 1772443472000000, 'run.state_changed', 11, 0, 'sync', 'account:a-2', '', '', 0, 'engine', '', '{"from":"pending","to":"processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (82, 1772443472000000, 'step.retry_scheduled', 11, 19, 'sync', 'account:a-2', 'do', 'push:a-2', 1, 'golden-worker', 'retryable_error', '{"backoff":"1s","delay":"1h15m0s","error":"rate limited (429)","next_at":"2026-03-02T10:39:32Z","outcome":"retryable","policy":{"initial":"2s","max":"5m0s","max_attempts":6,"multiplier":2,"on_failure":"needs_review","on_unknown":"retry"},"retry_after":"1h15m0s"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (83, 1772443472000000, 'run.state_changed', 11, 0, 'sync', 'account:a-2', '', '', 0, 'golden-worker', '', '{"from":"processing","to":"retrying"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (84, 1772443472000000, 'step.delayed', 12, 20, 'reminder', 'account:a-3', 'do', '', 0, 'engine', 'delayed', '{"due_at":"2026-03-02T11:24:31.9Z","wait":"1h59m59.9s"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (85, 1772444672000000, 'run.created', 14, 0, 'report', '', '', '', 0, 'scheduler', '', '{"run_key":"report-20m:2026-03-02T09:40:00Z","steps":1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (86, 1772444672000000, 'schedule.tick_late', 14, 0, 'report', 'schedule:report-20m', '', '', 0, 'scheduler', 'catch_up_latest', '{"late_by":"4m32s","policy":"latest","run_key":"report-20m:2026-03-02T09:40:00Z","schedule":"report-20m","tick":"2026-03-02T09:40:00Z","timezone":"UTC"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (87, 1772444672000000, 'step.claimed', 14, 22, 'report', '', 'do', 'report:report-20m:2026-03-02T09:40:00Z', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:45:02Z","worker":"golden-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (88, 1772444672000000, 'run.state_changed', 14, 0, 'report', '', '', '', 0, 'engine', '', '{"from":"pending","to":"processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (89, 1772444672100000, 'step.completed', 14, 22, 'report', '', 'do', 'report:report-20m:2026-03-02T09:40:00Z', 1, 'golden-worker', '', '{"outcome":"success","response_status":200}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (90, 1772444672100000, 'run.state_changed', 14, 0, 'report', '', '', '', 0, 'golden-worker', '', '{"from":"processing","to":"completed"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (91, 1772444672100000, 'run.created', 15, 0, 'transfer', 'transfer:x-1', '', '', 0, 'api', '', '{"run_key":"x-1","steps":1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (92, 1772444672100000, 'step.claimed', 15, 23, 'transfer', 'transfer:x-1', 'do', 'transfer:x-1', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T09:46:02.1Z","worker":"vanished-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (93, 1772444672100000, 'run.state_changed', 15, 0, 'transfer', 'transfer:x-1', '', '', 0, 'engine', '', '{"from":"pending","to":"processing"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (94, 1772445452100000, 'run.created', 16, 0, 'transfer', 'transfer:x-2', '', '', 0, 'api', '', '{"run_key":"x-2","steps":1}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (95, 1772445452100000, 'step.claimed', 16, 24, 'transfer', 'transfer:x-2', 'do', 'transfer:x-2', 1, 'engine', '', '{"lease_expires_at":"2026-03-02T10:27:32.1Z","worker":"other-worker"}');
INSERT INTO events (id, at, type, run_id, step_id, workflow, entity, step_name, effect_key, attempt, actor, reason, detail) VALUES (96, 1772445452100000, 'run.state_changed', 16, 0, 'transfer', 'transfer:x-2', '', '', 0, 'engine', '', '{"from":"pending","to":"processing"}');
INSERT INTO run_revisions (run_id, revision, input_before, input_after, entity_before, entity_after, diff, actor, note, at) VALUES (7, 1, X'7B22616464726573735F6F6B223A66616C73652C2270617263656C223A22732D31227D', X'7B22616464726573735F6F6B223A747275652C2270617263656C223A22732D3162227D', 'parcel:s-1', 'parcel:s-1b', '{"address_ok":true,"parcel":"s-1b"}', 'ops-desk', 'parcel relabelled', 1772443260700000);
INSERT INTO workflow_pauses (workflow, paused_at, actor, note) VALUES ('newsletter', 1772443471900000, 'ops-desk', 'list under review');
INSERT INTO schedules (name, through, last_tick, last_run_id, updated_at) VALUES ('report-20m', 1772444400000000, 1772444400000000, 14, 1772444672000000);
DELETE FROM sqlite_sequence;
INSERT INTO sqlite_sequence (name, seq) VALUES ('runs', 16);
INSERT INTO sqlite_sequence (name, seq) VALUES ('steps', 24);
INSERT INTO sqlite_sequence (name, seq) VALUES ('events', 96);
INSERT INTO sqlite_sequence (name, seq) VALUES ('attempts', 18);

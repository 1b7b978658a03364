-- Each fact written once. A run's creation, an attempt's claim and its end, and the run
-- state changes that follow them are kept in the rows that hold their facts, with the ID
-- of the audit event they make (see store/derive.go); the event is built again when the
-- audit trail is read instead of being stored in events. A NULL ID means the event is a
-- stored one, as every event written before this migration is.

-- run.created: who started the run, how many steps it has, and the event's ID.
ALTER TABLE runs ADD COLUMN created_by text NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN created_steps integer NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN created_event_id bigint;
CREATE INDEX runs_created_event ON runs (created_event_id) WHERE created_event_id IS NOT NULL;

-- The ID of a correction's run.input_corrected event: the entity a derived event names is
-- the run's entity at the time of the event (0: a correction made before this migration).
ALTER TABLE run_revisions ADD COLUMN event_id bigint NOT NULL DEFAULT 0;
-- The runs an entity was the entity of, before or after a correction.
CREATE INDEX run_revisions_entity_before ON run_revisions (entity_before);
CREATE INDEX run_revisions_entity_after ON run_revisions (entity_after);

-- The claim of the attempt in flight lives in the step row until the attempt ends:
-- claim_event_id is its step.claimed event (0: an attempt claimed before this migration,
-- whose attempt row and event are stored; NULL: no attempt in flight), then the time, the
-- lease's expiry as claimed, the outcome of the attempt before, and the run state change
-- the claim made ("from>to") with its event.
ALTER TABLE steps ADD COLUMN claim_event_id bigint;
ALTER TABLE steps ADD COLUMN claimed_at timestamptz;
ALTER TABLE steps ADD COLUMN claim_lease_until timestamptz;
ALTER TABLE steps ADD COLUMN claim_prev_outcome text NOT NULL DEFAULT '';
ALTER TABLE steps ADD COLUMN claim_run_event_id bigint;
ALTER TABLE steps ADD COLUMN claim_run_change text NOT NULL DEFAULT '';
UPDATE steps SET claim_event_id = 0 WHERE lease_owner <> '';
-- The reaper walks the attempts in flight, as few as the workers.
CREATE INDEX steps_inflight ON steps (claim_event_id) WHERE claim_event_id IS NOT NULL;
DROP INDEX steps_lease;
DROP INDEX steps_cancelled_lease;

-- An attempt row is written once, when the attempt ends; its ID is the ID of the first
-- audit event its end appended, so attempts are in the order they ended. It keeps the
-- claim (claim_event_id NULL: stored, before this migration) and the end: end_derived is
-- set when its step.completed event is derived (its ID is the row's ID), with the record's
-- reason and actor ('' for the worker), and the run state change that followed.
ALTER TABLE attempts ADD COLUMN claim_event_id bigint;
ALTER TABLE attempts ADD COLUMN lease_until timestamptz;
ALTER TABLE attempts ADD COLUMN prev_outcome text NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN claim_run_event_id bigint;
ALTER TABLE attempts ADD COLUMN claim_run_change text NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN end_derived boolean NOT NULL DEFAULT false;
ALTER TABLE attempts ADD COLUMN end_reason text NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN end_actor text NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN end_run_event_id bigint;
ALTER TABLE attempts ADD COLUMN end_run_change text NOT NULL DEFAULT '';
CREATE INDEX attempts_claim ON attempts (claim_event_id) WHERE claim_event_id IS NOT NULL;
CREATE INDEX attempts_claim_run ON attempts (claim_run_event_id) WHERE claim_run_event_id IS NOT NULL;
CREATE INDEX attempts_end_run ON attempts (end_run_event_id) WHERE end_run_event_id IS NOT NULL;
-- The attempts of a run are found through its steps.
DROP INDEX attempts_run;
-- Attempt IDs are audit event IDs from now on: above every attempt ID drawn before.
SELECT setval('events_id_seq', greatest(s.last, 1), s.last > 0)
FROM (SELECT greatest((SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM events_id_seq),
                      (SELECT coalesce(max(id), 0) FROM attempts)) AS last) s;

-- The old effect keys of steps whose key changed (a replay with a corrected input), so that
-- the audit trail of a key lists the attempts made under it.
CREATE TABLE step_keys_used (
    effect_key text   NOT NULL,
    step_id    bigint NOT NULL,
    PRIMARY KEY (effect_key, step_id)
);

-- What derives an event never changes.
CREATE FUNCTION audit_source_written_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% of an audit event is written once', TG_TABLE_NAME USING ERRCODE = 'restrict_violation';
END
$$;
CREATE TRIGGER attempts_write_once BEFORE UPDATE ON attempts FOR EACH ROW
WHEN (OLD.claim_event_id IS NOT NULL AND (OLD.end_derived OR NEW.end_derived IS DISTINCT FROM OLD.end_derived
    OR NEW.id IS DISTINCT FROM OLD.id OR NEW.run_id IS DISTINCT FROM OLD.run_id OR NEW.step_id IS DISTINCT FROM OLD.step_id
    OR NEW.step_name IS DISTINCT FROM OLD.step_name OR NEW.number IS DISTINCT FROM OLD.number
    OR NEW.effect_key IS DISTINCT FROM OLD.effect_key OR NEW.worker IS DISTINCT FROM OLD.worker
    OR NEW.started_at IS DISTINCT FROM OLD.started_at OR NEW.claim_event_id IS DISTINCT FROM OLD.claim_event_id
    OR NEW.lease_until IS DISTINCT FROM OLD.lease_until OR NEW.prev_outcome IS DISTINCT FROM OLD.prev_outcome
    OR NEW.claim_run_event_id IS DISTINCT FROM OLD.claim_run_event_id OR NEW.claim_run_change IS DISTINCT FROM OLD.claim_run_change
    OR NEW.end_run_event_id IS DISTINCT FROM OLD.end_run_event_id OR NEW.end_run_change IS DISTINCT FROM OLD.end_run_change))
EXECUTE FUNCTION audit_source_written_once();
CREATE TRIGGER steps_claim_once BEFORE UPDATE OF claim_event_id, claimed_at, claim_lease_until, claim_prev_outcome,
    claim_run_event_id, claim_run_change, attempt, effect_key, lease_owner ON steps FOR EACH ROW
WHEN (OLD.claim_event_id > 0 AND NEW.claim_event_id IS NOT NULL AND (NEW.claim_event_id IS DISTINCT FROM OLD.claim_event_id
    OR NEW.claimed_at IS DISTINCT FROM OLD.claimed_at OR NEW.claim_lease_until IS DISTINCT FROM OLD.claim_lease_until
    OR NEW.claim_prev_outcome IS DISTINCT FROM OLD.claim_prev_outcome OR NEW.claim_run_event_id IS DISTINCT FROM OLD.claim_run_event_id
    OR NEW.claim_run_change IS DISTINCT FROM OLD.claim_run_change OR NEW.attempt IS DISTINCT FROM OLD.attempt
    OR NEW.effect_key IS DISTINCT FROM OLD.effect_key OR NEW.lease_owner IS DISTINCT FROM OLD.lease_owner))
EXECUTE FUNCTION audit_source_written_once();
CREATE TRIGGER runs_creation_once BEFORE UPDATE OF workflow, run_key, created_at, created_by, created_steps, created_event_id ON runs
FOR EACH ROW WHEN (OLD.created_event_id IS NOT NULL)
EXECUTE FUNCTION audit_source_written_once();
CREATE TRIGGER run_revisions_append_only BEFORE UPDATE ON run_revisions FOR EACH ROW
EXECUTE FUNCTION audit_source_written_once();

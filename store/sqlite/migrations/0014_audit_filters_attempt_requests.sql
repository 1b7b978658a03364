-- The audit trail filtered by who acted, by workflow and by type, newest first. The stored
-- events are found through these indexes in ID order; of the derived ones, a run's
-- creation by who started it and an attempt's end by the worker that recorded it (the
-- expression is the actor eventlist.go reads), each in the order of its event's ID.
CREATE INDEX events_actor ON events (actor, id);
CREATE INDEX events_workflow ON events (workflow, id);
CREATE INDEX events_type ON events (type, id);
CREATE INDEX runs_created_by ON runs (created_by, created_event_id) WHERE created_event_id IS NOT NULL;
CREATE INDEX attempts_end_actor ON attempts ((CASE WHEN end_actor <> '' THEN end_actor ELSE worker END), id) WHERE end_derived = 1;
CREATE INDEX attempts_end_run_actor ON attempts ((CASE WHEN end_actor <> '' THEN end_actor ELSE worker END), end_run_event_id)
    WHERE end_run_event_id IS NOT NULL;

-- What an attempt sent (method, URL, headers, body as the engine recorded them: masked
-- and bounded), beside the destination's answer; '' when the step recorded nothing.
ALTER TABLE attempts ADD COLUMN request TEXT NOT NULL DEFAULT '';

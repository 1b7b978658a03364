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

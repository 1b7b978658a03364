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

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

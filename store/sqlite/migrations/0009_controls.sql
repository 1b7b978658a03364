-- Operators' controls over execution. A paused workflow keeps accepting runs; engines do
-- not claim its steps. Times are microseconds since the Unix epoch.
CREATE TABLE workflow_pauses (
    workflow  TEXT    PRIMARY KEY,
    paused_at INTEGER NOT NULL,
    actor     TEXT    NOT NULL,
    note      TEXT    NOT NULL DEFAULT ''
);

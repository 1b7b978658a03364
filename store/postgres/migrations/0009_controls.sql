-- Operators' controls over execution. A paused workflow keeps accepting runs; engines do
-- not claim its steps.
CREATE TABLE workflow_pauses (
    workflow  text        PRIMARY KEY,
    paused_at timestamptz NOT NULL,
    actor     text        NOT NULL,
    note      text        NOT NULL DEFAULT ''
);

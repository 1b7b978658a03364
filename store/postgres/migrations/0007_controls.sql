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

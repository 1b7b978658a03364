-- Schedules: how far each schedule has fired its ticks, so that a restart or a new leader
-- neither repeats nor loses one.
CREATE TABLE schedules (
    name        text        PRIMARY KEY,
    through     timestamptz NOT NULL,
    last_tick   timestamptz,
    last_run_id bigint      NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL
);

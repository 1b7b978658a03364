-- Schedules: how far each schedule has fired its ticks, so that a restart or a new leader
-- neither repeats nor loses one.
CREATE TABLE schedules (
    name        TEXT    PRIMARY KEY,
    through     INTEGER NOT NULL,
    last_tick   INTEGER NOT NULL DEFAULT 0,
    last_run_id INTEGER NOT NULL DEFAULT 0,
    updated_at  INTEGER NOT NULL
);

-- Leaders: one lease per duty (e.g. the lease reaper) so that one process among many runs it.
CREATE TABLE leaders (
    name       text        PRIMARY KEY,
    owner      text        NOT NULL,
    elected_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);

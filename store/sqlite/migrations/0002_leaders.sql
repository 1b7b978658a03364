-- Leaders: one lease per duty (e.g. the lease reaper) so that one process among many runs it.
CREATE TABLE leaders (
    name       TEXT    PRIMARY KEY,
    owner      TEXT    NOT NULL,
    elected_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);

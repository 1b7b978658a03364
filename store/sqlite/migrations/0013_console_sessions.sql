-- Console sessions, kept in the database so that every process serving the console sees a
-- sign-out, an expiry or an operator's "end session" at once. id is the hex SHA-256 of the
-- secret the cookie holds, never the secret. Times are microseconds since the Unix epoch;
-- ended_at is 0 while the session is active.
CREATE TABLE console_sessions (
    id         TEXT    PRIMARY KEY,
    actor      TEXT    NOT NULL,
    grants     TEXT    NOT NULL DEFAULT '{}',
    client     TEXT    NOT NULL DEFAULT '',
    created_at INTEGER NOT NULL,
    seen_at    INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    ended_at   INTEGER NOT NULL DEFAULT 0,
    ended_by   TEXT    NOT NULL DEFAULT '',
    end_reason TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX console_sessions_created ON console_sessions (created_at);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);

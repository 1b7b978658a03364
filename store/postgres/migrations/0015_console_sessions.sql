-- Console sessions, kept in the database so that every process serving the console sees a
-- sign-out, an expiry or an operator's "end session" at once. id is the hex SHA-256 of the
-- secret the cookie holds, never the secret; ended_at is NULL while the session is active.
CREATE TABLE console_sessions (
    id         text        PRIMARY KEY,
    actor      text        NOT NULL,
    grants     jsonb       NOT NULL DEFAULT '{}',
    client     text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL,
    seen_at    timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    ended_at   timestamptz,
    ended_by   text        NOT NULL DEFAULT '',
    end_reason text        NOT NULL DEFAULT ''
);
CREATE INDEX console_sessions_created ON console_sessions (created_at);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);

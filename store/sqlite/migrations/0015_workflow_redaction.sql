-- Each workflow's declared personal-data fields (a JSON array of paths), as the engine that
-- served it last recorded them, for readers without its definition. Times are
-- microseconds since the Unix epoch.
CREATE TABLE workflow_redaction (
    workflow   TEXT    PRIMARY KEY,
    fields     TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);

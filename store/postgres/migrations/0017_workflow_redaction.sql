-- Each workflow's declared personal-data fields (paths), as the engine that served it last
-- recorded them, for readers without its definition.
CREATE TABLE workflow_redaction (
    workflow   text        PRIMARY KEY,
    fields     jsonb       NOT NULL,
    updated_at timestamptz NOT NULL
);

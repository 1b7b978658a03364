-- The audit sequence: every audit event, stored in events or (later) derived from the row
-- that holds its facts, takes the next ID of one counter that the writer draws in the
-- order the transaction appends events. audit_spans records, per transaction, the IDs it
-- drew and the range of its events' times, so that a time range of the audit trail is
-- found as a range of IDs (first_id..last_id), whatever the clocks did. Times are
-- microseconds since the Unix epoch.
CREATE TABLE audit_spans (
    first_id INTEGER PRIMARY KEY,
    last_id  INTEGER NOT NULL,
    min_at   INTEGER NOT NULL,
    max_at   INTEGER NOT NULL
);
CREATE INDEX audit_spans_max_at ON audit_spans (max_at, first_id);
CREATE INDEX audit_spans_min_at ON audit_spans (min_at, last_id);

-- The events stored so far, in spans of 1,024 IDs.
INSERT INTO audit_spans (first_id, last_id, min_at, max_at)
    SELECT min(id), max(id), min(at), max(at) FROM events GROUP BY id / 1024;

-- Time ranges are found through audit_spans.
DROP INDEX events_time;

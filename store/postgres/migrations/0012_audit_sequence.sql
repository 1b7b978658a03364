-- The audit sequence: every audit event, stored in events or (later) derived from the row
-- that holds its facts, takes its ID from events_id_seq. audit_spans records, per
-- transaction, the smallest and largest ID it drew and the range of its events' times, so
-- that a time range of the audit trail is found as a range of IDs, whatever the clocks
-- did. Spans of concurrent transactions may overlap; each covers its own events.
CREATE TABLE audit_spans (
    first_id bigint      PRIMARY KEY,
    last_id  bigint      NOT NULL,
    min_at   timestamptz NOT NULL,
    max_at   timestamptz NOT NULL
);
CREATE INDEX audit_spans_max_at ON audit_spans (max_at, first_id);
CREATE INDEX audit_spans_min_at ON audit_spans (min_at, last_id);

-- The events stored so far, in spans of 1,024 IDs.
INSERT INTO audit_spans (first_id, last_id, min_at, max_at)
    SELECT min(id), max(id), min(at), max(at) FROM events GROUP BY id / 1024;

-- Time ranges are found through audit_spans.
DROP INDEX events_time;

-- Entities: business objects with a guarded state, changed only by compare-and-set.
CREATE TABLE entities (
    entity_key TEXT    PRIMARY KEY,
    state      TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    run_id     INTEGER NOT NULL,
    effect_key TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
);

-- Every applied transition, keyed by the effect key that applied it.
CREATE TABLE entity_transitions (
    effect_key TEXT    PRIMARY KEY,
    entity_key TEXT    NOT NULL,
    from_state TEXT    NOT NULL,
    to_state   TEXT    NOT NULL,
    run_id     INTEGER NOT NULL,
    step_id    INTEGER NOT NULL,
    at         INTEGER NOT NULL
);
CREATE INDEX entity_transitions_entity ON entity_transitions (entity_key, at);

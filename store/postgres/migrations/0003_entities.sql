-- Entities: business objects with a guarded state, changed only by compare-and-set.
CREATE TABLE entities (
    entity_key text        PRIMARY KEY,
    state      text        NOT NULL,
    version    bigint      NOT NULL,
    run_id     bigint      NOT NULL,
    effect_key text        NOT NULL,
    updated_at timestamptz NOT NULL
);

-- Every applied transition, keyed by the effect key that applied it.
CREATE TABLE entity_transitions (
    effect_key text        PRIMARY KEY,
    entity_key text        NOT NULL,
    from_state text        NOT NULL,
    to_state   text        NOT NULL,
    run_id     bigint      NOT NULL,
    step_id    bigint      NOT NULL,
    at         timestamptz NOT NULL
);
CREATE INDEX entity_transitions_entity ON entity_transitions (entity_key, at);

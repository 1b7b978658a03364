-- The latest checkpoint of a long step (store.StepCheckpointer), JSON: the attempts after
-- it go on from there.
ALTER TABLE steps ADD COLUMN progress bytea;

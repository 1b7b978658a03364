-- Attempts are written only by the store's claim, from the step rows the same statement
-- updates (UPDATE … RETURNING), and deleted only by retention, which deletes a run's
-- attempts before its steps and the run itself. Their foreign keys to runs and steps
-- checked, at every claim, what that statement guarantees, and share-locked the run's
-- and the step's rows (a multixact when a record of the same run updates the run at the
-- same time): without them the engine's steps/s on PostgreSQL rose by about 5 %.
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_run_id_fkey;
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_step_id_fkey;

-- The writer keeps run_counts as it inserts runs and writes their states, with one
-- statement per transaction: the triggers that did it ran two statements for every change
-- of a run's state, more than the change itself cost. Deleting a run (retention) still
-- decrements its count by trigger.
DROP TRIGGER run_counts_insert;
DROP TRIGGER run_counts_update;

package sqlstep

// NewUnchecked compiles spec as New does, but accepts statements that end the step's
// transaction: the run-time check of Step.Do is what the tests that use it try.
func NewUnchecked(spec Spec, db *DB) (*Step, error) { return compile(spec, db, checkFields) }

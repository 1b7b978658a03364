package onceflow

import (
	"context"
	"fmt"

	"github.com/onceflow/onceflow/store"
)

// StartTx is Start inside a transaction the caller owns: the run exists if and only if the
// caller's transaction commits, together with the caller's own writes (an order row and the
// run that fulfils it, say). tx is the backend's transaction type — a pgx.Tx for
// store/postgres; a store that cannot join the caller's transaction (it does not implement
// store.TxRunInserter, like store/sqlite) is an error.
//
// Workers learn of the run only after the commit: store/postgres notifies them from inside
// the transaction, so the notice is delivered on commit and never on rollback; otherwise
// they find the run at their next poll. A duplicate key returns the existing run, and a
// different input a *RunConflictError, as Start does.
func (c *Client) StartTx(ctx context.Context, tx any, workflow, runKey string, input any) (*Run, error) {
	ins, ok := c.store.(store.TxRunInserter)
	if !ok {
		return nil, fmt.Errorf("onceflow: start %s/%s in a transaction: the store (%T) cannot join the caller's transaction; use Start, or store/postgres", workflow, runKey, c.store)
	}
	p, err := c.runInsertParams(ctx, nil, workflow, runKey, input)
	if err != nil {
		return nil, err
	}
	run, created, err := ins.RunInsertTx(ctx, tx, p)
	if err != nil {
		return nil, fmt.Errorf("onceflow: start %s/%s in a transaction: %w", workflow, runKey, err)
	}
	return c.started(p, run, created)
}

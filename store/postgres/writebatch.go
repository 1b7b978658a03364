package postgres

import (
	"context"
	"fmt"

	"github.com/onceflow/onceflow/store"
)

var _ store.BatchWriter = (*Store)(nil)

// WriteBatch implements store.BatchWriter: the starts, the records and the claim in one
// transaction. The claim's locking scan goes out with the writes the starts and records
// queued, so it sees the new runs' steps and the steps the records released; it skips the
// steps whose run another transaction holds, as it holds run locks of its own already.
func (s *Store) WriteBatch(ctx context.Context, p store.WriteBatchParams) (*store.WriteBatchResult, error) {
	cp := p.Claim
	claiming := cp.Limit > 0 && len(cp.Workflows) > 0
	if claiming {
		if err := cp.Validate(); err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
	}
	starts := make([]store.RunInsertResult, len(p.Starts))
	validStarts := 0
	for i := range p.Starts {
		if err := validRunInsert(&p.Starts[i]); err != nil {
			starts[i].Err = fmt.Errorf("postgres: %w", err)
			continue
		}
		validStarts++
	}
	invalid := make([]error, len(p.Records))
	validRecords := 0
	for i := range p.Records {
		if err := p.Records[i].Validate(); err != nil {
			invalid[i] = fmt.Errorf("postgres: step %d: %w", p.Records[i].StepID, err)
			continue
		}
		validRecords++
	}
	res := &store.WriteBatchResult{Starts: starts, Records: make([]error, len(p.Records)), Claim: &store.ClaimResult{}}
	copy(res.Records, invalid)
	if validStarts == 0 && validRecords == 0 && !claiming {
		return res, nil
	}
	err := s.keyedTx(ctx, "write batch", func(t *txn) error {
		// From scratch on each attempt.
		*res.Claim = store.ClaimResult{}
		copy(res.Records, invalid)
		if validStarts > 0 {
			if err := runInsertMany(ctx, t, p.Starts, starts); err != nil {
				return err
			}
		}
		if validRecords > 0 {
			if err := record(ctx, t, p.Records, res.Records); err != nil {
				return err
			}
		}
		if !claiming {
			return nil
		}
		return claimWith(ctx, t, claimCandidatesNoWaitSQL, &cp, res.Claim)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// OneWriter implements store.BatchWriter: PostgreSQL commits many transactions at once.
func (s *Store) OneWriter() bool { return false }

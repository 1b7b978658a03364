package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/onceflow/onceflow/store"
)

var _ store.BatchWriter = (*Store)(nil)

// WriteBatch implements store.BatchWriter: the starts, the records and the claim in one
// transaction, whose one commit is the fsync of all of them.
func (s *Store) WriteBatch(ctx context.Context, p store.WriteBatchParams) (*store.WriteBatchResult, error) {
	claiming := p.Claim.Limit > 0 && len(p.Claim.Workflows) > 0
	if claiming {
		if err := p.Claim.Validate(); err != nil {
			return nil, fmt.Errorf("sqlite: %w", err)
		}
	}
	workflows, err := json.Marshal(p.Claim.Workflows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: write batch: %w", err)
	}
	starts, validStarts := validateStarts(p.Starts)
	records, validRecords, ids := validateRecords(p.Records)
	res := &store.WriteBatchResult{Starts: starts, Records: records, Claim: &store.ClaimResult{}}
	if validStarts == 0 && len(ids) == 0 && !claiming {
		return res, nil
	}
	err = s.writeAs(ctx, "write batch", cacheShare, func(w *writeTx) error {
		*res.Claim = store.ClaimResult{}
		// The claim needs the outputs of the completed steps of the runs it reads, and may
		// read runs the records read first; the writer's cache keeps only runs read with
		// them.
		w.outputs = true
		if validStarts > 0 {
			if err := insertAll(w, p.Starts, starts, validStarts); err != nil {
				return err
			}
		}
		if len(ids) > 0 {
			if err := recordAll(w, p.Records, validRecords, ids, records); err != nil {
				return err
			}
		}
		if !claiming {
			return nil
		}
		// The claim reads the steps table: the new runs' steps and the releases must be in
		// it. The runs' states, attempts and events are written once, when the
		// transaction ends.
		if err := w.flushSteps(); err != nil {
			return err
		}
		return claimIn(w, &p.Claim, string(workflows), p.Claim.Limit, res.Claim)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// OneWriter implements store.BatchWriter: SQLite has one writer.
func (s *Store) OneWriter() bool { return true }

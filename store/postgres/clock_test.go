package postgres_test

import (
	"context"
	"testing"
)

// DatabaseNow reads the server's clock, the one every engine on the database takes its
// time from: it moves from one call to the next, and reads after the start of a transaction
// begun before it (whose now() stands still).
func TestDatabaseNow(t *testing.T) {
	ctx := context.Background()
	s := freshStore(t)
	first, err := s.DatabaseNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.DatabaseNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !second.After(first) {
		t.Fatalf("DatabaseNow read %s, then %s: the clock did not move", first, second)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var txNow1, txNow2 = first, first
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&txNow1); err != nil {
		t.Fatal(err)
	}
	third, err := s.DatabaseNow(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&txNow2); err != nil {
		t.Fatal(err)
	}
	if !txNow2.Equal(txNow1) || !third.After(txNow1) {
		t.Fatalf("transaction now() %s then %s, DatabaseNow %s between: want now() fixed and DatabaseNow after it", txNow1, txNow2, third)
	}
}

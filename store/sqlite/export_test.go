package sqlite

import "context"

func init() { checkDerivedEvents = true }

// WriterPragma reads a pragma on the store's write connection. Pragmas such as synchronous
// belong to a connection, so another connection to the same file cannot observe them.
func WriterPragma(ctx context.Context, s *Store, name string) (string, error) {
	s.wlock <- struct{}{}
	defer func() { <-s.wlock }()
	var v string
	err := s.wc.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v)
	return v, err
}

// CheckDerived turns the comparison of derived and planned events (checkDerivedEvents) on
// or off: the benchmarks measure the write path without it.
func CheckDerived(on bool) { checkDerivedEvents = on }

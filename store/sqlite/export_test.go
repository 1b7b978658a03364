package sqlite

import "context"

// WriterPragma reads a pragma on the store's write connection. Pragmas such as synchronous
// belong to a connection, so another connection to the same file cannot observe them.
func WriterPragma(ctx context.Context, s *Store, name string) (string, error) {
	var v string
	err := s.w.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v)
	return v, err
}

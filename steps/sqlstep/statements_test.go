package sqlstep

import (
	"strings"
	"testing"
)

// Statements that end the step's transaction are refused, however the text hides them
// from one reading: in comments of one dialect, strings of the other, MySQL's executable
// comments, after a semicolon.
func TestStatementsThatEndTheTransactionAreRefused(t *testing.T) {
	for _, tc := range []struct{ query, want string }{
		{"CREATE TABLE audit (a INT)", "CREATE TABLE is DDL"},
		{"  create index orders_status on orders (status)", "CREATE INDEX is DDL"},
		{"CREATE TEMPORARY TABLE t (a INT)", "CREATE TEMPORARY is DDL"},
		{"ALTER TABLE orders ADD COLUMN note2 TEXT", "ALTER TABLE is DDL"},
		{"DROP TABLE orders", "DROP TABLE is DDL"},
		{"RENAME TABLE orders TO old_orders", "RENAME TABLE is DDL"},
		{"TRUNCATE orders", "TRUNCATE is DDL"},
		{"LOCK TABLES orders WRITE", "LOCK TABLES commits implicitly"},
		{"UNLOCK TABLES", "UNLOCK TABLES commits implicitly"},
		{"BEGIN", "BEGIN ends the transaction"},
		{"start transaction", "START TRANSACTION ends the transaction"},
		{"COMMIT", "COMMIT ends the transaction"},
		{"commit work", "COMMIT WORK ends the transaction"},
		{"END", "END ends the transaction"},
		{"ROLLBACK", "ROLLBACK ends the transaction"},
		{"SAVEPOINT a", "SAVEPOINT ends the transaction"},
		{"RELEASE SAVEPOINT a", "RELEASE SAVEPOINT ends the transaction"},
		{"XA START 'x'", "XA START ends the transaction"},
		{"PREPARE TRANSACTION 'x'", "PREPARE TRANSACTION ends the transaction"},
		{"SET autocommit = 1", "SET autocommit ends the transaction"},
		{"SET @@session.autocommit=1", "SET autocommit ends the transaction"},
		{"SET SESSION autocommit = 0", "SET autocommit ends the transaction"},
		{"GRANT SELECT ON orders TO clerk", "GRANT is an administrative statement"},
		{"FLUSH TABLES", "FLUSH TABLES is an administrative statement"},
		{"ANALYZE TABLE orders", "ANALYZE TABLE is an administrative statement"},
		{"OPTIMIZE TABLE orders", "OPTIMIZE TABLE is an administrative statement"},
		{"LOAD INDEX INTO CACHE orders", "LOAD INDEX is an administrative statement"},
		{"/* first */ COMMIT", "COMMIT ends"},
		{"-- first\nCOMMIT", "COMMIT ends"},
		{"# first\nCOMMIT", "COMMIT ends"},
		{"(COMMIT)", "COMMIT ends"},
		{"UPDATE orders SET status = 'paid' WHERE id = $1; COMMIT", "COMMIT ends"},
		{"UPDATE orders SET status = 'paid' WHERE id = ? /*!50000 ; CREATE TABLE x (a INT) */", "CREATE TABLE is DDL"},
		{"UPDATE orders SET status = 'paid' WHERE id = ? /*M! ; COMMIT */", "COMMIT ends"},
		{`SELECT 'a\'; COMMIT; -- '`, "COMMIT ends"},                   // PostgreSQL: standard strings
		{`SELECT 'a\''; DROP TABLE orders; -- '`, "DROP TABLE is DDL"}, // MySQL: a backslash escape
		{"SELECT 1 --x; COMMIT", "COMMIT ends"},                        // MySQL: "--x" is no comment
		{"SELECT 1 /* /* */ ; COMMIT */", "COMMIT ends"},               // MySQL: comments do not nest
		{"SELECT 1 # note\n; COMMIT", "COMMIT ends"},                   // PostgreSQL: # is an operator
		{"SELECT $$; COMMIT $$", "COMMIT ends"},                        // MySQL: $$ is a name
	} {
		err := CheckStatement(tc.query)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckStatement(%q) = %v, want it refused saying %q", tc.query, err, tc.want)
		}
	}
	for _, q := range []string{
		"UPDATE orders SET note = 'COMMIT; DROP TABLE orders' WHERE id = $1",
		"INSERT INTO log (msg) VALUES ('begin'), ('end')",
		"UPDATE orders SET status = 'paid' WHERE id = ? -- ; COMMIT",
		"SELECT id FROM orders WHERE id = $1 FOR UPDATE",
		"WITH paid AS (UPDATE orders SET status = 'paid' WHERE id = $1 RETURNING id) SELECT id FROM paid",
		`SELECT "commit" FROM t`,
		"SELECT $body$ a; b $body$ FROM t",
		"CALL record_payment($1)",
		"SET LOCAL lock_timeout = '5s'",
		"DELETE FROM holds WHERE order_id = ? /* ; COMMIT */",
		"REPLACE INTO stock (sku, n) VALUES (?, ?)",
	} {
		if err := CheckStatement(q); err != nil {
			t.Errorf("CheckStatement(%q) = %v, want it accepted", q, err)
		}
	}
}

package sqlstep

import (
	"fmt"
	"strings"
)

// A step's statements run in the one transaction onceflow opens and commits with the
// effect key. A statement that ends that transaction — transaction control, or one of
// the statements MySQL and MariaDB commit implicitly before they run (DDL, LOCK TABLES,
// GRANT, …) — would commit what came before it without the key, and let what comes after
// it and the key commit on their own. Such statements are refused when the step is
// compiled; the run-time check of Step.Do catches any that slip through (a procedure that
// commits, a statement prepared from a string).

// endsTransaction lists the first words of statements that end the step's transaction on
// PostgreSQL, MySQL or MariaDB, with why. A workflow file does not say which database
// its DSN names, so a statement that ends the transaction on any of them is refused: DDL
// is transactional on PostgreSQL, but a step that changes a schema on every event is a
// migration, not a business change.
var endsTransaction = map[string]string{
	// Transaction control, on every database.
	"BEGIN":     "transaction control",
	"START":     "transaction control",
	"COMMIT":    "transaction control",
	"END":       "transaction control",
	"ROLLBACK":  "transaction control",
	"ABORT":     "transaction control",
	"SAVEPOINT": "transaction control",
	"RELEASE":   "transaction control",
	"XA":        "transaction control",
	// DDL and the other statements MySQL and MariaDB commit implicitly.
	"CREATE":    "ddl",
	"ALTER":     "ddl",
	"DROP":      "ddl",
	"RENAME":    "ddl",
	"TRUNCATE":  "ddl",
	"LOCK":      "lock",
	"UNLOCK":    "lock",
	"GRANT":     "admin",
	"REVOKE":    "admin",
	"FLUSH":     "admin",
	"RESET":     "admin",
	"SHUTDOWN":  "admin",
	"ANALYZE":   "admin",
	"CHECK":     "admin",
	"OPTIMIZE":  "admin",
	"REPAIR":    "admin",
	"CACHE":     "admin",
	"CHANGE":    "admin",
	"STOP":      "admin",
	"INSTALL":   "admin",
	"UNINSTALL": "admin",
	"IMPORT":    "admin",
}

// checkTransaction reports the first statement of query that would end the step's
// transaction. query may hold several statements (a MySQL DSN with multiStatements=true
// runs them all); each is read both as MySQL reads text (backslash escapes in strings,
// "#" comments, the code of /*! … */ comments) and as PostgreSQL does (standard strings,
// dollar quotes, "--" comments without a space), so that no reading hides a statement the
// database would run.
func checkTransaction(query string) error {
	for _, mysql := range []bool{true, false} {
		for _, words := range leadingWords(query, mysql) {
			kind, ok := endsTransaction[words[0]]
			if !ok && words[0] == "SET" && setsAutocommit(words) {
				kind, ok = "transaction control", true
			}
			if !ok && words[0] == "PREPARE" && len(words) > 1 && words[1] == "TRANSACTION" {
				kind, ok = "transaction control", true
			}
			if !ok && words[0] == "LOAD" && len(words) > 1 && words[1] == "INDEX" {
				kind, ok = "admin", true
			}
			if !ok {
				continue
			}
			what := words[0]
			if len(words) > 1 && objectWords[words[1]] {
				what += " " + words[1]
			}
			switch kind {
			case "transaction control":
				return fmt.Errorf("%s ends the transaction in which onceflow runs the step's statements and writes its effect key: leave BEGIN, COMMIT, ROLLBACK, SAVEPOINT and autocommit to onceflow", statementName(words))
			case "ddl":
				return fmt.Errorf("%s is DDL, which MySQL and MariaDB commit implicitly, so the changes before it would be committed without the effect key: a sql step changes rows (INSERT, UPDATE, DELETE, SELECT); change the schema with a migration, outside workflows", what)
			case "lock":
				return fmt.Errorf("%s commits implicitly on MySQL and MariaDB, so the changes before it would be committed without the effect key: lock the rows with SELECT … FOR UPDATE instead", what)
			default:
				return fmt.Errorf("%s is an administrative statement, which MySQL and MariaDB commit implicitly, so the changes before it would be committed without the effect key: a sql step changes rows (INSERT, UPDATE, DELETE, SELECT)", what)
			}
		}
	}
	return nil
}

// objectWords are the second words that name what a statement works on: "CREATE TABLE",
// "LOCK TABLES", "START TRANSACTION".
var objectWords = map[string]bool{"TABLE": true, "TABLES": true, "INDEX": true, "VIEW": true, "DATABASE": true, "SCHEMA": true,
	"TEMPORARY": true, "SEQUENCE": true, "PROCEDURE": true, "FUNCTION": true, "TRIGGER": true, "EVENT": true, "USER": true,
	"ROLE": true, "TRANSACTION": true, "SAVEPOINT": true, "SLAVE": true, "REPLICA": true, "MASTER": true, "SERVER": true,
	"TABLESPACE": true, "PACKAGE": true, "WORK": true}

// statementName names a transaction control statement: "COMMIT", "START TRANSACTION",
// "SET autocommit".
func statementName(words []string) string {
	switch {
	case words[0] == "SET":
		return "SET autocommit"
	case len(words) > 1 && (objectWords[words[1]] || words[0] == "XA"):
		return words[0] + " " + words[1]
	}
	return words[0]
}

// setsAutocommit reports whether a SET statement's words name autocommit.
func setsAutocommit(words []string) bool {
	for _, w := range words[1:] {
		if strings.TrimPrefix(strings.TrimPrefix(w, "@@"), "SESSION.") == "AUTOCOMMIT" || strings.HasSuffix(w, ".AUTOCOMMIT") {
			return true
		}
	}
	return false
}

// maxWords is how many words of each statement leadingWords keeps.
const maxWords = 6

// leadingWords splits query into statements at the semicolons outside strings, quoted
// names and comments, and returns the first words of each, upper-cased (at most maxWords;
// none for an empty statement). mysql chooses MySQL's reading of the text over
// PostgreSQL's.
func leadingWords(query string, mysql bool) [][]string {
	var out [][]string
	var cur []string
	var word strings.Builder
	flush := func() {
		if word.Len() > 0 && len(cur) < maxWords {
			cur = append(cur, strings.ToUpper(word.String()))
		}
		word.Reset()
	}
	end := func() {
		flush()
		if len(cur) > 0 {
			out = append(out, cur)
		}
		cur = nil
	}
	inCode := 0 // MySQL: open /*! … */ comments, whose text is code
	for i := 0; i < len(query); i++ {
		c := query[i]
		next := byte(0)
		if i+1 < len(query) {
			next = query[i+1]
		}
		switch {
		case c == ';':
			end()
		case c == '\'' || c == '"' || c == '`' && mysql:
			flush()
			i = skipQuoted(query, i, mysql)
			if len(cur) < maxWords {
				cur = append(cur, "") // a string or quoted name is a word of its own
			}
		case c == '$' && !mysql && (word.Len() == 0) && dollarTag(query, i) != "":
			flush()
			tag := dollarTag(query, i)
			j := strings.Index(query[i+len(tag):], tag)
			if j < 0 {
				i = len(query)
			} else {
				i += len(tag) + j + len(tag) - 1
			}
			if len(cur) < maxWords {
				cur = append(cur, "")
			}
		case c == '-' && next == '-' && (!mysql || i+2 >= len(query) || query[i+2] <= ' '):
			flush()
			for i < len(query) && query[i] != '\n' {
				i++
			}
		case c == '#' && mysql:
			flush()
			for i < len(query) && query[i] != '\n' {
				i++
			}
		case c == '/' && next == '*':
			flush()
			if mysql && i+2 < len(query) && (query[i+2] == '!' || query[i+2] == 'M' && i+3 < len(query) && query[i+3] == '!') {
				i += 2
				if query[i] == 'M' {
					i++
				}
				for i+1 < len(query) && query[i+1] >= '0' && query[i+1] <= '9' {
					i++ // the version the code needs
				}
				inCode++
				continue
			}
			i = skipComment(query, i, !mysql)
		case c == '*' && next == '/' && inCode > 0:
			flush()
			inCode--
			i++
		case c == '_' || c == '$' || c == '@' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80:
			word.WriteByte(c)
		default:
			flush()
		}
	}
	end()
	return out
}

// skipQuoted returns the index of the quote that closes the string or quoted name that
// opens at i (the last index if none does). A doubled quote stands for itself; with
// backslash escapes (MySQL), so does a quote after a backslash.
func skipQuoted(s string, i int, backslash bool) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && backslash && q != '`':
			j++
		case s[j] == q && j+1 < len(s) && s[j+1] == q:
			j++
		case s[j] == q:
			return j
		}
	}
	return len(s) - 1
}

// skipComment returns the index of the "/" that ends the block comment opening at i (the
// last index if none does); PostgreSQL's block comments nest.
func skipComment(s string, i int, nested bool) int {
	depth := 0
	for j := i; j+1 < len(s); j++ {
		switch {
		case s[j] == '/' && s[j+1] == '*' && (nested || depth == 0):
			depth++
			j++
		case s[j] == '*' && s[j+1] == '/':
			if depth--; depth == 0 {
				return j + 1
			}
			j++
		}
	}
	return len(s) - 1
}

// dollarTag returns the PostgreSQL dollar quote ("$$", "$body$") that opens at i, or "".
func dollarTag(s string, i int) string {
	for j := i + 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '$':
			return s[i : j+1]
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 || c >= '0' && c <= '9' && j > i+1:
		default:
			return ""
		}
	}
	return ""
}

// Package testsvc finds the real services that tests run against — PostgreSQL, MariaDB,
// NATS JetStream and RabbitMQ — from the environment .ci/run exports. A test whose service
// is not configured, or cannot be reached, is skipped; under CI=true it fails instead, so
// that CI never passes by skipping.
package testsvc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables naming the services.
const (
	PostgresEnv = "ONCEFLOW_TEST_POSTGRES_URL"
	MySQLEnv    = "ONCEFLOW_TEST_MYSQL_DSN"
	NATSEnv     = "ONCEFLOW_TEST_NATS_URL"
	AMQPEnv     = "ONCEFLOW_TEST_AMQP_URL"
)

// examples say what to set, per variable.
var examples = map[string]string{
	PostgresEnv: "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
	MySQLEnv:    "root@tcp(127.0.0.1:3306)/test",
	NATSEnv:     "nats://127.0.0.1:4222",
	AMQPEnv:     "amqp://guest:guest@127.0.0.1:5672/",
}

// Postgres returns the PostgreSQL URL tests may create schemas in.
func Postgres(t testing.TB) string { t.Helper(); return need(t, PostgresEnv) }

// PostgresSchema names a fresh schema (prefix and random digits) in the PostgreSQL test
// database for one test, and drops it with everything in it when the test ends, after
// the stores registered later are closed. It returns the database's URL and the schema.
func PostgresSchema(t testing.TB, prefix string) (url, schema string) {
	t.Helper()
	url = Postgres(t)
	schema = prefix + Suffix()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return url, schema
}

// MySQL returns the MariaDB/MySQL DSN (root, may create databases).
func MySQL(t testing.TB) string { t.Helper(); return need(t, MySQLEnv) }

// NATS returns the URL of a NATS server with JetStream.
func NATS(t testing.TB) string { t.Helper(); return need(t, NATSEnv) }

// AMQP returns the URL of a RabbitMQ server.
func AMQP(t testing.TB) string { t.Helper(); return need(t, AMQPEnv) }

func need(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s is not set: these tests must run in CI", name)
		}
		t.Skipf("set %s=%s to run this test", name, examples[name])
	}
	if addr := hostPort(v); addr != "" {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true but the service of %s is unreachable: %v", name, err)
			}
			t.Skipf("the service of %s is unreachable: %v", name, err)
		}
		c.Close()
	}
	return v
}

// hostPort finds the address in a URL or a MySQL DSN ("user@tcp(host:port)/db").
func hostPort(v string) string {
	if i := strings.Index(v, "@tcp("); i >= 0 {
		rest := v[i+5:]
		if j := strings.IndexByte(rest, ')'); j >= 0 {
			return rest[:j]
		}
	}
	u, err := url.Parse(v)
	if err != nil || u.Host == "" {
		return ""
	}
	if u.Port() == "" {
		return ""
	}
	return u.Host
}

// Suffix returns 12 random hex digits for the names of the tables, schemas, queues and
// streams a test creates, so that test runs sharing a service do not collide.
func Suffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

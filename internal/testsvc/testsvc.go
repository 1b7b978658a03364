// Package testsvc finds the real services that tests run against — PostgreSQL, MariaDB,
// NATS JetStream and RabbitMQ — from the environment .ci/run exports or, where a variable
// is not set, at the service's default address on this machine (127.0.0.1 and the
// service's standard port, with the credentials .ci/run uses) when something answers
// there. A test whose service cannot be found is skipped; under CI=true it fails instead,
// so that CI never passes by skipping.
//
// go test prints nothing of a package that passes, so a skipped test would go unseen: a
// package's TestMain wraps its testing.M with Report, which writes one line per package
// naming the services that were missing, how many tests each cost, and how to enable them
// (to the terminal, where there is one).
package testsvc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
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

// defaults are each service's address on this machine, as .ci/run starts it; they also
// say what to set.
var defaults = map[string]string{
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
		// DROP DATABASE checkpoints the server: on a busy one it can take a while.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
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

// PostgresDatabase creates a database of its own (prefix and random digits) on the
// PostgreSQL test server for one test, for a test that must see everything in its
// database (other tests share the test database), and drops it when the test ends. It
// returns the new database's URL.
func PostgresDatabase(t testing.TB, prefix string) string {
	t.Helper()
	base := Postgres(t)
	name := prefix + Suffix()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// DROP DATABASE checkpoints the server: on a busy one it can take a while.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", PostgresEnv, err)
	}
	u.Path = "/" + name
	return u.String()
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
		return defaultFor(t, name)
	}
	if addr := hostPort(v); addr != "" {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true but the service of %s is unreachable: %v", name, err)
			}
			probeMu.Lock()
			skips[name]++
			probeMu.Unlock()
			t.Skipf("the service of %s is unreachable: %v", name, err)
		}
		c.Close()
	}
	return v
}

// services names the services by their variables, for messages.
var services = map[string]string{PostgresEnv: "PostgreSQL", MySQLEnv: "MariaDB/MySQL", NATSEnv: "NATS JetStream", AMQPEnv: "RabbitMQ"}

// probes remembers, per variable, whether its default address answered: it is asked once
// per test binary.
var (
	probeMu sync.Mutex
	probes  = map[string]error{}
	skips   = map[string]int{}
)

// defaultFor returns the default address of the service of name when something answers
// there, setting name in the environment so that the child processes the test starts
// find it too; otherwise it skips the test (fails it under CI=true).
func defaultFor(t testing.TB, name string) string {
	t.Helper()
	v := defaults[name]
	addr := hostPort(v)
	probeMu.Lock()
	err, asked := probes[name]
	if !asked {
		var c net.Conn
		if c, err = net.DialTimeout("tcp", addr, 500*time.Millisecond); err == nil {
			c.Close()
			_ = os.Setenv(name, v)
		}
		probes[name] = err
	}
	if err != nil {
		skips[name]++
	}
	probeMu.Unlock()
	if err == nil {
		return v
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but %s is not set and nothing answers on %s: these tests must run in CI", name, addr)
	}
	t.Skipf("nothing answers on %s for %s: start it there, or set %s (e.g. %s)", addr, services[name], name, v)
	return ""
}

// Report wraps a package's testing.M (goleak.VerifyTestMain(testsvc.Report(m))): after
// the tests ran it writes one line saying which services were missing and how many tests
// that skipped, to the terminal when there is one (go test shows nothing else of a
// package that passes), else to standard error.
func Report(m interface{ Run() int }) interface{ Run() int } { return reporter{m} }

type reporter struct{ m interface{ Run() int } }

func (r reporter) Run() int {
	code := r.m.Run()
	if line := skipLine(); line != "" {
		out := os.Stderr
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			defer tty.Close()
			out = tty
		}
		fmt.Fprintln(out, line)
	}
	return code
}

// skipLine is the line Report writes, "" when no test was skipped for a missing service.
func skipLine() string {
	probeMu.Lock()
	defer probeMu.Unlock()
	if len(skips) == 0 {
		return ""
	}
	names := make([]string, 0, len(skips))
	for name := range skips {
		names = append(names, name)
	}
	sort.Strings(names)
	var parts []string
	total := 0
	for _, name := range names {
		total += skips[name]
		where := hostPort(defaults[name])
		if v := os.Getenv(name); v != "" && hostPort(v) != "" {
			where = hostPort(v)
		}
		parts = append(parts, fmt.Sprintf("%s (%d, nothing answers on %s; start it there or set %s)", services[name], skips[name], where, name))
	}
	return fmt.Sprintf("%s: %d tests skipped for want of %s", packageName(), total, strings.Join(parts, ", "))
}

// packageName is the package under test, relative to the module: go test runs a
// package's tests in its directory.
func packageName() string {
	wd, err := os.Getwd()
	if err != nil {
		return filepath.Base(os.Args[0])
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if rel, err := filepath.Rel(dir, wd); err == nil {
				return "./" + filepath.ToSlash(rel)
			}
			break
		}
		if filepath.Dir(dir) == dir {
			break
		}
	}
	return wd
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

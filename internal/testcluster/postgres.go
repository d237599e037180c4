package testcluster

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgreSQL: every test gets a database of its own on the shared server,
// created by PostgresDB and dropped by its cleanup, or by the reaper when the
// process dies first. scripts/services.sh creates the login role the tests
// use (PostgresUser, allowed to create databases) on a fresh machine.

// PostgresAddr is the shared server's address; STAMEN_TEST_PG_ADDR
// overrides it.
var PostgresAddr = envOr("STAMEN_TEST_PG_ADDR", "127.0.0.1:5432")

// PostgresUser and its password are the role scripts/services.sh creates.
const (
	PostgresUser     = "stamen_test"
	postgresPassword = "stamen_test"
)

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// PostgresURL is the URL of database db on the server at addr (host:port),
// as PostgresUser. Tests pass a proxy's address to take the server away.
func PostgresURL(addr, db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(PostgresUser, postgresPassword),
		Host:     addr,
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

var (
	pgOnce sync.Once
	pgErr  error
	pgSeq  atomic.Int64
)

// RequirePostgres checks once that the test role can log in to the shared
// server; without it the test fails (it never skips).
func RequirePostgres(t testing.TB) {
	t.Helper()
	SkipIfShort(t, "testcluster: needs PostgreSQL")
	pgOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, PostgresURL(PostgresAddr, "postgres"))
		if err != nil {
			pgErr = fmt.Errorf("log in to PostgreSQL on %s as %s (scripts/services.sh creates the role): %w", PostgresAddr, PostgresUser, err)
			return
		}
		pgErr = conn.Close(ctx)
	})
	if pgErr != nil {
		missing(t, "no PostgreSQL for the tests", []string{pgErr.Error()})
	}
}

// PostgresDB creates an empty database for t and returns its name; t's
// cleanup drops it, closing the connections still open to it.
func PostgresDB(t testing.TB) string {
	t.Helper()
	RequirePostgres(t)
	name := fmt.Sprintf("stamen_t_%d_%s_%d", os.Getpid(), randomHex(3), pgSeq.Add(1))
	if err := atExit("pgdb", name); err != nil {
		t.Fatalf("testcluster: %v", err)
	}
	if err := pgAdmin("CREATE DATABASE " + pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("testcluster: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := pgAdmin("DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"); err != nil {
			t.Errorf("testcluster: drop database %s: %v", name, err)
		}
	})
	return name
}

// pgAdmin runs one statement on the server's postgres database.
func pgAdmin(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, PostgresURL(PostgresAddr, "postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// TerminatePostgresBackends ends every client session PostgresUser has
// open to database db, as
// PostgreSQL's restart or a failover does (pg_terminate_backend), and
// waits until they are gone; the clients find out at their next statement.
func TerminatePostgresBackends(t testing.TB, db string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, PostgresURL(PostgresAddr, "postgres"))
	if err != nil {
		t.Fatalf("testcluster: connect to PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	// With a timeout, pg_terminate_backend waits for the backend to exit.
	var n int
	// The sessions are chosen first (MATERIALIZED): PostgreSQL may test
	// the conditions of one WHERE in any order, and would then try to end
	// other users' sessions.
	if err := conn.QueryRow(ctx, `WITH s AS MATERIALIZED (SELECT pid FROM pg_stat_activity
		WHERE datname = $1 AND usename = current_user AND backend_type = 'client backend' AND pid <> pg_backend_pid())
		SELECT count(*) FROM s WHERE pg_terminate_backend(pid, 10000)`, db).Scan(&n); err != nil {
		t.Fatalf("testcluster: terminate the sessions of %s: %v", db, err)
	}
	if n == 0 {
		t.Fatalf("testcluster: no session of %s to terminate", db)
	}
}

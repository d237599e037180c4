package testcluster

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestPostgresDBIsPrivateAndDropped: each call gives an empty database the
// test role owns (it can create pg_trgm, a trusted extension), and the
// cleanup drops it.
func TestPostgresDBIsPrivateAndDropped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var name string
	t.Run("create", func(t *testing.T) {
		name = PostgresDB(t)
		if other := PostgresDB(t); other == name {
			t.Fatalf("two calls gave the same database %s", name)
		}
		conn, err := pgx.Connect(ctx, PostgresURL(PostgresAddr, name))
		if err != nil {
			t.Fatalf("connect to %s: %v", name, err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_trgm"); err != nil {
			t.Fatalf("create pg_trgm: %v", err)
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").Scan(&n); err != nil || n != 0 {
			t.Fatalf("new database has %d tables (err %v), want 0", n, err)
		}
	})
	admin, err := pgx.Connect(ctx, PostgresURL(PostgresAddr, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %s still exists after its test's cleanup", name)
	}
}

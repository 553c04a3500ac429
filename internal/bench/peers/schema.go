package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
)

// newSchema makes a schema of a unique name starting with prefix on dsn's
// database, and returns it with a function that drops it. gue and neoq
// name their tables themselves; each measurement runs them in a fresh
// schema through search_path.
func newSchema(ctx context.Context, dsn, prefix string) (string, func(context.Context) error, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := prefix + hex.EncodeToString(b[:])
	exec := func(ctx context.Context, stmt string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return fmt.Errorf("connecting to PostgreSQL: %w", err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
		return nil
	}
	if err := exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, err
	}
	return schema, func(ctx context.Context) error { return exec(ctx, "DROP SCHEMA "+schema+" CASCADE") }, nil
}

// newDatabase makes a database of a unique name starting with prefix on
// dsn's server, and returns a DSN that names it with a function that drops
// it (with FORCE, closing connections left open). neoq's migrations name
// the public schema, so it cannot run in a schema of its own.
func newDatabase(ctx context.Context, dsn, prefix string) (string, func(context.Context) error, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
	exec := func(ctx context.Context, stmt string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return fmt.Errorf("connecting to PostgreSQL: %w", err)
		}
		defer conn.Close(context.WithoutCancel(ctx))
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
		return nil
	}
	if err := exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	own := withParams(dsn, map[string]string{"dbname": name})
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		own = u.String()
	}
	return own, func(ctx context.Context) error { return exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)") }, nil
}

// withParams sets connection parameters in a PostgreSQL DSN, a URL or
// key=value pairs.
func withParams(dsn string, params map[string]string) string {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		v := u.Query()
		for k, p := range params {
			v.Set(k, p)
		}
		u.RawQuery = v.Encode()
		return u.String()
	}
	var b strings.Builder
	b.WriteString(strings.TrimSpace(dsn))
	for k, p := range params {
		fmt.Fprintf(&b, " %s=%s", k, p)
	}
	return b.String()
}

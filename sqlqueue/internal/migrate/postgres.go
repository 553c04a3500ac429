package migrate

// Postgres runs each file in a transaction that first takes a transaction
// advisory lock named after the tables.
var Postgres = &Dialect{
	Dir:         "postgres",
	Begin:       "BEGIN",
	TxLock:      "SELECT 1 FROM (SELECT pg_advisory_xact_lock(hashtext($1))) AS l",
	TableExists: "SELECT count(*) FROM pg_catalog.pg_tables WHERE tablename = $1 AND schemaname = ANY(current_schemas(false))",
}

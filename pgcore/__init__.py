"""PostgreSQL basics every package shares: SQLSTATEs and SqlError, type oids, names, arrays, Refusal."""

"""SQL text -> sqlglot tree, and the digest-keyed caches of parsed statements."""

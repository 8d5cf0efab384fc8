"""The schema-only catalog relay: the shadow database and the minimal client that forwards catalog queries to it."""

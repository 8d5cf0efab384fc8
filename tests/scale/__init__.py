"""Scale: the events generator, the sharded dev cluster, worker supervision."""

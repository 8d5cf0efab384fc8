"""The network side: the listener and the per-connection driver (sockets, TLS, cancel, limits), and authentication."""

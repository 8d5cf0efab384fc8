"""The protocol conversation of one authenticated session: frontend messages in, reply bytes out, no sockets."""

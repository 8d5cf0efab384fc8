"""`lapras-proxy whatif`: replay a database's own query log day by day through the real engine, in
process, and report what the proxy would have answered, at what error, at each budget (operator only)."""

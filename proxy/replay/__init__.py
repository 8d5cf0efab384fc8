"""`lapras-proxy replay`: replaying a query log through a running proxy, and its report."""

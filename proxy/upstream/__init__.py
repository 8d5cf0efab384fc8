"""The upstream database as the proxy sees it below the service: the embedded PostgreSQL it may start
(`embedded`), the demo tables it may load there (`demo_data`, `events_data`, `shop_data`) and the value
lists it reads from the upstream's public tables (`value_lists`). Imports only `proxy.config` of proxy."""

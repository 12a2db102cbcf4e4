"""Stoker's one endpoint: the HTTP server, its rules, the route table, the gateway's own process and the pipe to it."""

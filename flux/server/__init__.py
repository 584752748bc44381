"""The Flux server: HTTP API, persistence and dispatch."""

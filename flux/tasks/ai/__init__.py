"""flux-core's AI agent layer is not part of this engine (docs/migrating-from-flux-core.md)."""

raise ImportError(
    "flux.tasks.ai (flux-core's agents, LLM providers and MCP tools) is not supported by this engine; "
    "see docs/migrating-from-flux-core.md"
)

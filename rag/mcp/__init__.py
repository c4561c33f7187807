"""The MCP face: rag's tools for AI assistants (Claude Desktop, VS Code, any MCP client).

`tools` does the work (search, answer, look up, export, page, trace a quote, ingest) and keeps
each result within a character budget; `server` wraps it in the official MCP SDK's
`MCPServer`, `stdio` serves it for `rag mcp` and `http` mounts it at `/mcp` of `rag serve`.
Only `server`, `stdio` and `http` import the SDK, so `rag ask` never loads it.
"""

"""The MCP face: rag's tools for AI assistants (Claude Desktop, VS Code, any MCP client).

`tools` does the work (search, answer, look up, export, page, trace a quote, ingest) and keeps
each result within a character budget; `server` wraps it in the official MCP SDK's
`MCPServer` for `rag mcp` (stdio) and `http` mounts the same server at `/mcp` of `rag serve`.
Only `server` and `http` import the SDK, so `rag ask` never loads it.
"""

"""The mcp domain: real MCP servers in a Docker sandbox, driven through tool calls."""

"""``acmi mcp``: the ACMI tools over the Model Context Protocol (stdio)."""

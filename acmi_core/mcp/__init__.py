"""The ACMI tools over the Model Context Protocol: ``server.py`` builds the server for one
caller (tenant and scope from its API key); ``acmi mcp`` serves it over stdio, ``http.py``
over stateless streamable HTTP (the mcp Lambda function)."""

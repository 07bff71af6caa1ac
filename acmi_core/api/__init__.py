"""The HTTP API: one FastAPI app built from routers (one per Lambda function)."""

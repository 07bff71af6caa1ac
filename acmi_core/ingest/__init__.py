"""Webhook ingestion: source configs, source mappers (Make, n8n, Gmail, generic) and the
one ingest function the HTTP layer calls."""

"""Authentication: API keys, webhook HMAC signatures, Google OIDC tokens."""

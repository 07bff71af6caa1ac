"""Archive sinks: the AWS SDK glue ``acmi_core.jobs.sink`` reaches through ``register_sink``.
Each module registers its scheme when imported; not handler modules (no function row)."""

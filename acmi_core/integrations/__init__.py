"""Adapters that put ACMI under other frameworks' interfaces. Each calls only the public
client (``acmi_core.client.Acmi`` and its sub-APIs), never a private path, and is
imported only by whoever uses it: its framework is an extra of its own (``langgraph``:
``AcmiStore``, ``acmi[langgraph]``; ``openai_agents``: ``AcmiSession``,
``acmi[openai-agents]``)."""

"""``python -m acmi_core.testing.conformance``: the suite against the store the environment
selects; prints the report, exit status 1 on any failure (``--help`` for the options)."""

from __future__ import annotations

from acmi_core.testing.conformance import main

raise SystemExit(main())

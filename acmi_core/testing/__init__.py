"""Test helpers for ACMI backends: ``acmi_core.testing.conformance`` is the conformance suite."""

"""The client facade (``Acmi``): the layer that composes every capability below it."""

from acmi_core.client.facade import Acmi

__all__ = ["Acmi"]

"""``State``: a namespace of attributes, Starlette's ``app.state`` and ``request.state``.

``app.state`` holds what the app sets up (``app.state.db = ...`` in a start-up hook); ``request.state``
carries values from middleware to the handler (``request.state.user = ...``) and starts as a copy of
the mapping the app's ``lifespan`` yielded, if it yielded one (Starlette's lifespan state)."""
from __future__ import annotations

from typing import Any, Mapping

__all__ = ["State"]


class State:
    """Attributes set and read freely; a missing one raises ``AttributeError`` naming it."""

    def __init__(self, initial: Mapping[str, Any] | None = None):
        if initial:
            self.__dict__.update(initial)

    def __getattr__(self, name: str) -> Any:  # only called for attributes that are not set
        raise AttributeError(f"state has no attribute {name!r}")

    def __contains__(self, name: str) -> bool:
        return name in self.__dict__

    def __repr__(self) -> str:
        return f"State({self.__dict__!r})"

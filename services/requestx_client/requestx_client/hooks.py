"""Hooks, as ``requests.hooks``: ``{"response": [callable, ...]}``, each called as
``hook(response, **send_kwargs)``; a hook that returns a value replaces the response."""

from __future__ import annotations

from typing import Any

HOOKS = ["response"]


def default_hooks() -> dict[str, list[Any]]:
    return {event: [] for event in HOOKS}


def dispatch_hook(key: str, hooks: Any, hook_data: Any, **kwargs: Any) -> Any:
    """Run the ``key`` hooks of ``hooks`` (a list, or one callable) on ``hook_data``."""
    found = hooks.get(key) if hooks else None
    if found:
        if callable(found):
            found = [found]
        for hook in found:
            result = hook(hook_data, **kwargs)
            if result is not None:
                hook_data = result
    return hook_data

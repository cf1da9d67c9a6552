"""Server push to groups of connections on the standalone servers (an in-process registry).

Methods join and leave groups through their context (``await ctx.join("room")``); the application
publishes with ``server.broadcast("room", "event", params)``. A broadcast is encoded once and queued on
each subscriber without waiting: a subscriber more than ``max_push_queue`` messages behind is dropped
(closed with 1008), so one slow client never slows the others or grows memory without bound. The
Channels adapter uses Channels groups (the channel layer) instead, behind the same context calls.
"""

from __future__ import annotations

from typing import Any


class Groups:
    def __init__(self, engine):
        self.engine = engine
        self._members: dict[str, set] = {}

    async def join(self, session, group: str) -> None:
        _check_name(group)
        self._members.setdefault(group, set()).add(session)
        session.groups.add(group)

    async def leave(self, session, group: str) -> None:
        members = self._members.get(group)
        if members is not None:
            members.discard(session)
            if not members:
                del self._members[group]
        session.groups.discard(group)

    def forget(self, session) -> None:
        """A closed connection leaves every group."""
        for group in list(session.groups):
            members = self._members.get(group)
            if members is not None:
                members.discard(session)
                if not members:
                    del self._members[group]
        session.groups.clear()

    def broadcast(self, group: str, method: str, params: Any = None) -> int:
        """Send a notification to every member of ``group``; returns how many took it."""
        members = self._members.get(group)
        if not members:
            return 0
        data = self.engine.encode_notification(method, params)
        return sum(1 for session in list(members) if session.push(data))

    def size(self, group: str) -> int:
        return len(self._members.get(group, ()))


def _check_name(group) -> None:
    # the rule of Channels group names, so that an application moves between the two unchanged
    if not isinstance(group, str) or not 0 < len(group) < 100 or not all(c.isascii() and (c.isalnum() or c in "-_.") for c in group):
        raise ValueError("a group name is 1-99 ASCII letters, digits, '-', '_' or '.'")

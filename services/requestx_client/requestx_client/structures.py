"""``CaseInsensitiveDict`` and ``LookupDict``, as in ``requests.structures``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any


class CaseInsensitiveDict(MutableMapping[str, Any]):
    """Keys compare case-insensitively; the case of the last key set is kept for iteration."""

    # _checked: PreparedRequest.prepare_headers found every header valid and none of them None, and
    # nothing was set since (a deletion cannot make it invalid). A session's headers are then checked
    # once, not on every request.
    __slots__ = ("_store", "_checked")

    def __init__(self, data: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None, **kwargs: Any) -> None:
        self._store: dict[str, tuple[str, Any]] = {}
        self._checked = False
        if data is not None:
            self.update(data)
        if kwargs:
            self.update(kwargs)

    def __setitem__(self, key: str, value: Any) -> None:
        self._store[key.lower()] = (key, value)
        self._checked = False

    def __getitem__(self, key: str) -> Any:
        return self._store[key.lower()][1]

    def __delitem__(self, key: str) -> None:
        del self._store[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._store.values())

    def __len__(self) -> int:
        return len(self._store)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key.lower() in self._store

    def get(self, key: str, default: Any = None) -> Any:
        item = self._store.get(key.lower())
        return default if item is None else item[1]

    def lower_items(self) -> Iterator[tuple[str, Any]]:
        return ((k, v[1]) for k, v in self._store.items())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            other = CaseInsensitiveDict(other)
        else:
            return NotImplemented
        return dict(self.lower_items()) == dict(other.lower_items())

    def copy(self) -> "CaseInsensitiveDict":
        new = CaseInsensitiveDict.__new__(CaseInsensitiveDict)  # no __init__: one copy per request
        new._store = self._store.copy()
        new._checked = self._checked
        return new

    def __repr__(self) -> str:
        return str(dict(self.items()))


class LookupDict(dict):  # type: ignore[type-arg]
    """Names kept as attributes: ``d.name`` reads one (an unknown name is an AttributeError, as for any
    object), while ``d["name"]`` and ``d.get("name")`` give None (or the default) for an unknown name.
    The dict itself stays empty, as in requests, so ``len(d)`` and ``"name" in d`` do not see the names."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        super().__init__()

    def __repr__(self) -> str:
        return f"<lookup '{self.name}'>"

    def __getitem__(self, key: Any) -> Any:
        return self.__dict__.get(key, None)

    def get(self, key: Any, default: Any = None) -> Any:
        return self.__dict__.get(key, default)

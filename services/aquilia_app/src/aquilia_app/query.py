"""An immutable, chainable query builder compiling to parameterized SQL.

    Q("items").filter(price__gte=10).exclude(name__contains="x").order("-price", "id").limit(20).offset(40)

Values always travel as ``?`` parameters, never inside the SQL text; identifiers (table, columns) are
checked against ``[A-Za-z_][A-Za-z0-9_]*`` and quoted.  Every chain step returns a new ``Q`` made with
``object.__new__`` plus a copy of a few slots (no ``__init__``, no deep copies: the clauses are
tuples shared between clones).

Lookups: ``eq`` (default), ``ne``, ``lt``, ``lte``, ``gt``, ``gte``, ``in``, ``contains``,
``startswith``, ``isnull``.  Errors raise :class:`QueryError` (a ``ValueError``).
"""
from __future__ import annotations

import re
from typing import Any, Iterable

__all__ = ["Q", "QueryError", "insert_sql"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class QueryError(ValueError):
    pass


def _ident(name: str) -> str:
    if not isinstance(name, str) or not _IDENT.match(name):
        raise QueryError(f"invalid identifier {name!r}")
    return '"' + name + '"'


def _like_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


_OPS = {"eq": "=", "ne": "!=", "lt": "<", "lte": "<=", "gt": ">", "gte": ">="}


def _condition(key: str, value: Any) -> tuple[str, tuple]:
    col, _, op = key.partition("__")
    c = _ident(col)
    op = op or "eq"
    if op in _OPS:
        if value is None:
            if op == "eq":
                return f"{c} IS NULL", ()
            if op == "ne":
                return f"{c} IS NOT NULL", ()
            raise QueryError(f"{key}: None cannot be compared with {op}")
        return f"{c} {_OPS[op]} ?", (value,)
    if op == "in":
        if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
            raise QueryError(f"{key}: 'in' needs a list/tuple/set of values")
        vals = tuple(value)
        if not vals:
            return "0", ()  # x IN () is always false
        return f"{c} IN ({', '.join('?' * len(vals))})", vals
    if op == "contains":
        return f"{c} LIKE ? ESCAPE '\\'", ("%" + _like_escape(str(value)) + "%",)
    if op == "startswith":
        return f"{c} LIKE ? ESCAPE '\\'", (_like_escape(str(value)) + "%",)
    if op == "isnull":
        return (f"{c} IS NULL" if value else f"{c} IS NOT NULL"), ()
    raise QueryError(f"unknown lookup {op!r} in {key!r}")


class Q:
    __slots__ = ("_table", "_where", "_params", "_order", "_limit", "_offset", "_columns")

    def __init__(self, table: str, columns: Iterable[str] | None = None):
        self._table = _ident(table)
        self._where: tuple = ()
        self._params: tuple = ()
        self._order: tuple = ()
        self._limit: int | None = None
        self._offset: int | None = None
        self._columns = ", ".join(_ident(c) for c in columns) if columns else "*"

    def _clone(self) -> "Q":
        q = object.__new__(Q)
        q._table = self._table
        q._where = self._where
        q._params = self._params
        q._order = self._order
        q._limit = self._limit
        q._offset = self._offset
        q._columns = self._columns
        return q

    def _add(self, conds: dict, negate: bool) -> "Q":
        parts = []
        params: tuple = ()
        for key, value in conds.items():
            sql, p = _condition(key, value)
            parts.append(sql)
            params += p
        if not parts:
            return self
        clause = " AND ".join(parts)
        if len(parts) > 1:
            clause = "(" + clause + ")"
        if negate:
            clause = "NOT " + clause if len(parts) > 1 else "NOT (" + clause + ")"
        q = self._clone()
        q._where = self._where + (clause,)
        q._params = self._params + params
        return q

    def filter(self, **conds: Any) -> "Q":
        return self._add(conds, False)

    def exclude(self, **conds: Any) -> "Q":
        return self._add(conds, True)

    def order(self, *fields: str) -> "Q":
        out = []
        for f in fields:
            if not isinstance(f, str) or not f:
                raise QueryError(f"invalid order field {f!r}")
            desc = f.startswith("-")
            out.append(_ident(f[1:] if desc else f) + (" DESC" if desc else " ASC"))
        q = self._clone()
        q._order = self._order + tuple(out)
        return q

    def limit(self, n: int) -> "Q":
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise QueryError(f"limit must be a non-negative int, got {n!r}")
        q = self._clone()
        q._limit = n
        return q

    def offset(self, n: int) -> "Q":
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise QueryError(f"offset must be a non-negative int, got {n!r}")
        q = self._clone()
        q._offset = n
        return q

    def only(self, *columns: str) -> "Q":
        q = self._clone()
        q._columns = ", ".join(_ident(c) for c in columns) if columns else "*"
        return q

    # -- compilation --------------------------------------------------------------------------
    def _where_sql(self) -> str:
        return " WHERE " + " AND ".join(self._where) if self._where else ""

    def sql(self) -> tuple[str, tuple]:
        s = f"SELECT {self._columns} FROM {self._table}{self._where_sql()}"
        params = self._params
        if self._order:
            s += " ORDER BY " + ", ".join(self._order)
        if self._limit is not None or self._offset is not None:
            s += " LIMIT ?"
            params += (self._limit if self._limit is not None else -1,)
            if self._offset is not None:
                s += " OFFSET ?"
                params += (self._offset,)
        return s, params

    def count_sql(self) -> tuple[str, tuple]:
        return f"SELECT COUNT(*) FROM {self._table}{self._where_sql()}", self._params

    def delete_sql(self) -> tuple[str, tuple]:
        return f"DELETE FROM {self._table}{self._where_sql()}", self._params

    def update_sql(self, **values: Any) -> tuple[str, tuple]:
        if not values:
            raise QueryError("update needs at least one column")
        sets = ", ".join(f"{_ident(k)} = ?" for k in values)
        return f"UPDATE {self._table} SET {sets}{self._where_sql()}", tuple(values.values()) + self._params

    def __repr__(self) -> str:
        return f"Q({self.sql()!r})"


def insert_sql(table: str, values: dict) -> tuple[str, tuple]:
    if not values:
        raise QueryError("insert needs at least one column")
    cols = ", ".join(_ident(k) for k in values)
    return f"INSERT INTO {_ident(table)} ({cols}) VALUES ({', '.join('?' * len(values))})", tuple(values.values())

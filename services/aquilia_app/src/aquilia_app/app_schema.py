"""The reference app's SQLite schema, in a module with no side effects.

``server.py`` applies it once in the parent process before the workers start; importing
``aquilia_app.app`` there instead would build the app (and its metrics) before the workers exist.
"""

SCHEMA = """
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    price REAL NOT NULL,
    tags TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX IF NOT EXISTS items_price ON items(price);
"""

"""The payloads the aquilia_app peers serve: byte-for-byte what aquilia_app's /json and /ping send."""

JSON_SMALL = {
    "message": "Hello, World!",
    "service": "aquilia_app",
    "version": 1,
    "ok": True,
    "ratio": 0.75,
    "tags": ["fast", "async", "typed", "asgi"],
    "numbers": [1, 2, 3, 4, 5, 6, 7, 8],
    "nested": {"id": 42, "name": "answer", "active": False, "score": 99.5},
}
PONG = b"pong"

"""The payloads the aquilia_app peers serve: byte-for-byte what aquilia_app's /ping, /json, /json-large and
/html send (the /html peers render aquilia_app's own html/page.html with HTML_ROWS)."""

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
JSON_LARGE = [{"id": i, "name": f"item-{i}", "value": (i % 10) * 0.5} for i in range(1000)]
HTML_ROWS = [{"id": i, "message": m} for i, m in enumerate(
    ["fortune favours the bold", "<script>alert('escaped')</script>", "a penny saved", "měřeno, ne odhadnuto",
     "keep it simple", "measure twice", "cut once", "premature optimization", "the map is not the territory",
     "less is more", "make it work, make it right, make it fast", "ship it"], start=1)]
HTML_CONTEXT = {"title": "aquilia_app", "service": "aquilia_app", "rows": HTML_ROWS}

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# Under Bazel, runfiles get __init__.py files (tests/ becomes a package): put both the
# service root (for rpc_app) and tests/ (for helpers, channels_app) on sys.path explicitly.
for _p in (HERE, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import django  # noqa: E402
from django.conf import settings  # noqa: E402

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="rpc-app-tests",
        INSTALLED_APPS=["channels"],
        CHANNEL_LAYERS={},
        ASGI_APPLICATION="tests.asgi_app.application",
    )
    django.setup()

import os
import sys
import tempfile

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
    if os.environ.get("RPC_APP_TEST_DATABASE"):
        # test_django_db.py: a real SQLite database, auth, and an in-memory channel layer for groups
        settings.configure(
            DEBUG=False,
            SECRET_KEY="rpc-app-tests",
            INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "channels", "rpcshop"],
            DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3",
                                   "NAME": os.path.join(tempfile.mkdtemp(prefix="rpc-app-db-"), "db.sqlite3")}},
            CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}},
            USE_TZ=True,
        )
    else:
        settings.configure(
            DEBUG=False,
            SECRET_KEY="rpc-app-tests",
            INSTALLED_APPS=["channels"],
            CHANNEL_LAYERS={},
            ASGI_APPLICATION="tests.asgi_app.application",
        )
    django.setup()

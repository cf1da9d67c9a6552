import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

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

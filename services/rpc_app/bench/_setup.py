"""Shared bench set-up: sys.path and a minimal Django configuration."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def django_setup():
    import django
    from django.conf import settings
    if not settings.configured:
        settings.configure(DEBUG=False, SECRET_KEY="bench", INSTALLED_APPS=["channels"], CHANNEL_LAYERS={})
        django.setup()


def best_of(fn, repeat=5):
    """min over ``repeat`` runs of fn() -> seconds (noise on a shared machine only adds time)."""
    return min(fn() for _ in range(repeat))

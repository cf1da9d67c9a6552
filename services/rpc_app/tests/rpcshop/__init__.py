"""A tiny Django app with one model, for the adapter's database tests (test_django_db.py)."""

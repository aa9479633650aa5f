"""The store targets of tests/store (a SQLite file, a PostgreSQL schema) for CLI tests."""

from tests.store.conftest import postgres_server, target  # noqa: F401 (fixtures)

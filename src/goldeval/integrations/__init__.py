"""Glue for optional reporting plugins: pytest-html (``html``) and JUnit XML (``junit``).

Each module exposes ``register(config, state)``, called from ``pytest_configure`` once
``--golden`` is active. Nothing here is imported by a plain pytest run.
"""

"""``python -m goldeval.testing.llm_server`` (see :mod:`.cli`)."""

from goldeval.testing.llm_server.cli import main

raise SystemExit(main())

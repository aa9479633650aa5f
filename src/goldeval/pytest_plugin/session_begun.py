"""LAST_SESSION says a golden session began before anything else can stop it.

The controller records how a session ended (its exit status and run) when it finishes. A
session that stops before that (a bad option value that pytest's argument parser refuses, a
usage error while the plugin configures or starts the session, a crash, a kill) recorded
nothing, and ``goldeval gate`` with no run re-gated the earlier session's green run: exit 0
right after a session that exited 4. The record is written here, as the initial conftests
load (after the options are known, before pytest parses them strictly), and replaced by the
session's end.
"""

from __future__ import annotations

import os

import pytest

from goldeval.core.errors import GoldevalError
from goldeval.pytest_plugin.config_keys import is_listing
from goldeval.pytest_plugin.run_settings import out_dir_of
from goldeval.results.last_session import write_session_begun


def mark_session_begun(config: pytest.Config) -> None:
    """Write the "began, no end yet" record for a ``--golden`` session that will run (not
    on an xdist worker, not for a listing, help or version). Never fails the session."""
    known = config.known_args_namespace
    if not getattr(known, "golden", None) or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if is_listing(known) or any(getattr(known, n, False) for n in ("help", "version", "markers")):
        return
    try:
        write_session_begun(out_dir_of(config, getattr(known, "golden_out", None)))
    except (OSError, ValueError, GoldevalError):
        pass

"""Every path the session will write, checked before the run (controller only).

One check (:func:`goldeval.results.write_targets.write_target_problem`) for the runs folder,
the run store, ``--golden-save-baseline``, ``--golden-junit`` and ``--golden-cache``: a path
no retry can fix (a file where a folder is wanted, a folder named as the file, an unwritable
place, a link inside the project) is a usage error (exit 4) naming the option, before the
first model call. It used to be found after every call ("retry it", exit 75) or, for
``--golden-junit``, as a traceback after the run had exited 0 in LAST_SESSION.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from goldeval.core.errors import ConfigError
from goldeval.pytest_plugin.decision import typed_path
from goldeval.pytest_plugin.recording import store_url
from goldeval.pytest_plugin.state import GoldenSession
from goldeval.results.write_targets import Kind, write_target_problem
from goldeval.store import store_file, store_url_problem


def preflight_write_targets(state: GoldenSession) -> None:
    """Raise :class:`ConfigError` (field: the option) for the first path that cannot be
    written."""
    store = state.settings.store
    if store is not None:
        problem = store_url_problem(store)
        if problem is not None:
            raise ConfigError(problem, field=_store_option(state))
    for option, path, kind in _targets(state):
        problem = write_target_problem(path, project=state.project_root, kind=kind)
        if problem is not None:
            raise ConfigError(f"{path}: {problem}", field=option)


def _store_option(state: GoldenSession) -> str:
    typed = state.config.getoption("golden_store", default=None)
    return "--golden-store" if typed else "GOLDEVAL_STORE"


def _targets(state: GoldenSession) -> Iterator[tuple[str, Path, Kind]]:
    s = state.settings
    yield "--golden-out", s.out_dir, "folder"
    url = store_url(state)
    file = store_file(url) if url is not None else None
    if file is not None:  # (a relative sqlite:/// path is read from where pytest started)
        here = Path(state.config.invocation_params.dir)
        yield _store_option(state) if s.store else "the run store", here / file, "file"
    if s.save_baseline:
        names = state.variants.names if state.variants is not None else (None,)
        for name in names:
            path = typed_path(state, s.save_baseline, name)
            if path is not None:
                yield "--golden-save-baseline", path, "file"
    junit = typed_path(state, s.junit_path, None)
    if junit is not None:
        yield "--golden-junit", Path(os.path.normpath(junit)), "file"
    if s.cache_dir is not None:
        yield "--golden-cache", s.cache_dir, "folder"
    # pytest's and pytest-html's reports: a path they cannot write failed after the run
    # (exit 1 over a session goldeval had decided 0, LAST_SESSION saying 0)
    here = Path(state.config.invocation_params.dir)
    for option, dest in (("--junitxml", "xmlpath"), ("--html", "htmlpath")):
        typed = getattr(state.config.option, dest, None)
        if typed:
            # as pytest and pytest-html spell it out: $VARS and ~ expanded
            path = Path(os.path.normpath(here / os.path.expandvars(os.path.expanduser(typed))))
            yield option, path, "file"

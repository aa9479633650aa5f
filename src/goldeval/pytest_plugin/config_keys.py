"""What the plugin keeps on the pytest config: the run state's stash key and the marker registry.

Light on purpose (pytest only): the entry point imports it for every pytest run, and the run
state and the collection read it without importing the entry point.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from goldeval.pytest_plugin.state import GoldenSession  # noqa: F401 (read in a string)


#: How many selected items ``--golden-run-key`` left out as graded in an earlier session
#: (collection.deselect_graded; an xdist controller takes its workers' figure). Only such a
#: session may turn pytest's "no tests" (5) into a decision on the stored attempts: one whose
#: ``-k`` or ``-m`` selected nothing keeps 5.
RESUME_DESELECTED = pytest.StashKey[int]()
#: The same figure in xdist's ``workeroutput``.
RESUME_DESELECTED_OUTPUT = "goldeval_resume_deselected"


def resumed_everything(config: pytest.Config, pytest_status: int) -> bool:
    """Whether pytest's "no tests" (5) means every selected attempt was graded in an earlier
    session of the run key (the session then decides on the stored attempts), rather than a
    ``-k`` / ``-m`` / node id that selected nothing (5 stands: nothing was asked to run)."""
    return (
        pytest_status == pytest.ExitCode.NO_TESTS_COLLECTED
        and config.stash.get(RESUME_DESELECTED, 0) > 0
    )


#: pytest's options that show the items or fixtures instead of running them: no run is
#: recorded, compared, refused or decided (``--fixtures`` printed "goldeval decision: exit 1"
#: and recorded it in LAST_SESSION while pytest exited 0).
LISTING_OPTIONS = (
    "collectonly",
    "showfixtures",
    "show_fixtures_per_test",
    # the set-up plan (no test is called: "nothing was graded", a failed run recorded)
    "setupplan",
    "setuponly",
    "cacheshow",
)


def is_listing(option: object) -> bool:
    """Whether ``option`` (``config.option`` or the known-args namespace) asks a listing."""
    return any(getattr(option, name, False) for name in LISTING_OPTIONS)


#: How many lines of the ``markers`` ini value come from the ini file itself (see IniMarkers).
_INI_MARKER_LINES = pytest.StashKey[int]()
#: Description of the markers goldeval registers for row tags (told apart from plugins' marks).
TAG_MARKER_DESCRIPTION = "golden rows tagged"


class IniMarkers:
    """Counts the markers declared in the ini file, before any plugin or conftest adds its own.

    pytest keeps one list: the ini file's lines first, then every ``addinivalue_line`` in
    configure order (conftests, plugins, pytest itself). A row tag may take a name the user
    declared (a label), never one that code registered (code may act on it: skip, retry...).
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[_INI_MARKER_LINES] = len(config.getini("markers"))


def reserved_marks(config: pytest.Config) -> frozenset[str]:
    """Marker names registered by code (pytest, plugins, conftests) rather than the ini file."""
    lines = config.getini("markers")
    start = config.stash.get(_INI_MARKER_LINES, 0)
    names = set()
    for line in lines[start:]:
        name, _, description = line.partition(":")
        if description.strip().startswith(TAG_MARKER_DESCRIPTION):
            continue  # a row tag goldeval registered itself
        names.add(name.split("(")[0].strip())
    return frozenset(names)


#: The session's run state. Defined here, not in goldeval.pytest_plugin.state, so that asking "is
#: the plugin active?" never imports the heavy modules in a project that does not use it.
STATE_KEY = pytest.StashKey["GoldenSession"]()

#: The test report attribute that carries an attempt's record (plain data) to the controller.
PAYLOAD_ATTR = "goldeval"

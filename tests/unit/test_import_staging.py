"""The import's temporary folder is removed whenever a SIGTERM lands (cli/importers/place.py).

The handler is called directly (not through a real signal) at the moments a real one landed
by chance in CI: as ``mkdir`` returned, and a second one during the removal.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from goldeval.cli.importers.place import _Terminate, staging


def test_signal_landing_as_the_folder_is_made_still_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminate = _Terminate()
    real_mkdir = Path.mkdir

    def mkdir_then_signal(self: Path, *args: object, **kwargs: object) -> None:
        real_mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        if ".import-" in self.name:
            terminate(signal.SIGTERM, None)  # what Python runs as the syscall returns

    monkeypatch.setattr(Path, "mkdir", mkdir_then_signal)
    golden = tmp_path / "golden"
    with pytest.raises(SystemExit) as ended:
        with staging(golden, "ds", terminate):
            pytest.fail("the import must not start after the signal")
    assert ended.value.code == 128 + signal.SIGTERM
    assert not golden.exists()


def test_second_signal_during_the_removal_does_not_cut_it_short(tmp_path: Path) -> None:
    terminate = _Terminate()
    golden = tmp_path / "golden"
    with pytest.raises(SystemExit) as ended:
        with staging(golden, "ds", terminate) as tmp:
            (tmp / "rows.jsonl").write_text("{}\n", encoding="utf-8")
            try:
                terminate(signal.SIGTERM, None)
            finally:
                # the second one lands before the removal holds signals
                terminate(signal.SIGHUP, None)
    assert ended.value.code == 128 + signal.SIGTERM
    assert not golden.exists()

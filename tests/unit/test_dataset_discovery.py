"""Finding a dataset by id under the golden root: links to folders are not followed (they
could loop or lead out of the project), and the error says so instead of "none found"."""

from __future__ import annotations

from pathlib import Path

import pytest

from goldeval.core.errors import ConfigError
from goldeval.dataset.discovery import resolve_dataset


def test_a_linked_dataset_folder_is_named_in_the_error(tmp_path: Path) -> None:
    outside = tmp_path / "outside" / "demo"
    outside.mkdir(parents=True)
    (outside / "dataset.yaml").write_text("version: demo-v1\nname: demo\n", encoding="utf-8")
    golden = tmp_path / "project" / "golden"
    golden.mkdir(parents=True)
    (golden / "demo").symlink_to(outside)
    with pytest.raises(ConfigError) as err:
        resolve_dataset("demo-v1", golden, tmp_path / "project")
    text = str(err.value)
    assert "unknown dataset 'demo-v1'" in text
    assert f"not followed: {golden / 'demo'} is a link to a folder" in text
    # The folder itself, named as a path, is what the hint offers.
    assert resolve_dataset("golden/demo", golden, tmp_path / "project") == outside.resolve()

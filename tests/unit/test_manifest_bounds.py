"""A dataset manifest is YAML read with bounds (goldeval.core.bounded_yaml): an alias bomb
hidden in a variant's options, or a nest hundreds of levels deep, is a clear error naming the
file and the line, fast, never a hang, gigabytes of memory or an INTERNALERROR."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from goldeval.core.bounded_yaml import load_yaml
from goldeval.core.errors import GoldevalError
from goldeval.core.limits import LimitExceeded, default
from goldeval.dataset.manifest import read_manifest

HEAD = "version: t-v1\nvariants:\n  - {name: a}\n  - name: b\n    options:\n"


def _bomb(levels: int) -> str:
    lines = ['      l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for n in range(1, levels):
        refs = ", ".join([f"*l{n - 1}"] * 10)
        lines.append(f"      l{n}: &l{n} [{refs}]")
    return HEAD + "\n".join(lines) + "\n"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "dataset.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_an_alias_bomb_in_a_manifest_is_refused_fast(tmp_path: Path) -> None:
    path = _write(tmp_path, _bomb(9))  # 10**9 nodes once expanded, under a kilobyte here
    started = time.monotonic()
    with pytest.raises(GoldevalError) as caught:
        read_manifest(path)
    assert time.monotonic() - started < 30  # it built 10**9 nodes before (minutes, GBs)
    assert str(caught.value.path) == str(path) and caught.value.line is not None
    assert "aliases" in caught.value.message or "nodes" in caught.value.message


def test_a_deep_nest_in_a_manifest_is_refused(tmp_path: Path) -> None:
    deep = "      schema: " + "{a: " * 300 + "1" + "}" * 300 + "\n"
    with pytest.raises(GoldevalError) as caught:
        read_manifest(_write(tmp_path, HEAD + deep))
    assert "nesting" in caught.value.message


def test_a_few_aliases_are_still_fine(tmp_path: Path) -> None:
    text = (
        "version: t-v1\nprompt: &p {system: hi}\n"
        "variants:\n  - {name: a}\n  - {name: b, prompt: *p}\n"
    )
    manifest = read_manifest(_write(tmp_path, text))
    assert manifest.version == "t-v1"


def test_a_manifest_over_the_yaml_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    """A 100 MB comment (under file_bytes) kept collection parsing for minutes."""
    most = int(default("yaml_bytes"))
    path = _write(tmp_path, "version: t-v1\n# " + "x" * most + "\n")
    with pytest.raises(GoldevalError, match="4 MiB") as caught:
        read_manifest(path)
    assert str(caught.value.path) == str(path)
    # the same text handed to the YAML reader itself (a promptfoo file) names the limit
    with pytest.raises(LimitExceeded, match="yaml_bytes"):
        load_yaml("a: 1\n# " + "é" * (most // 2) + "\n", path)
    assert load_yaml("a: 1\n# " + "x" * (most - 100) + "\n", path)[1] == {"a": 1}

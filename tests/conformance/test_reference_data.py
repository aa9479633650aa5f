"""Conformance: the reference's own data, laid out as a throwaway project, gives its figures.

The reference data lives outside this repository (``../shared/reference/java-ai-golden-data``
next to the checkout, as in the workplace and CI). It is never copied into the project; when
the folder is absent the test is skipped with that reason. ``GOLDEVAL_REFERENCE_DATA`` points
elsewhere.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from goldeval.core.rates import RATE_NAMES
from goldeval.results.rollup import COUNTER_KEYS
from tests.helpers import ROOT, RunFiles

REFERENCE = Path(
    os.environ.get(
        "GOLDEVAL_REFERENCE_DATA", ROOT.parent / "shared" / "reference" / "java-ai-golden-data"
    )
)
RATES = (*RATE_NAMES, "unstableCaseRate")
COUNTERS = COUNTER_KEYS

pytestmark = pytest.mark.skipif(
    not REFERENCE.is_dir(), reason=f"reference data not present at {REFERENCE}"
)


@pytest.fixture
def reference_project(pytester: pytest.Pytester) -> Path:
    res = REFERENCE / "src/main/resources"
    inferred = REFERENCE / "_inferred_not_verbatim/src/main/resources"
    gen = pytester.path / "golden/generation"
    hold = pytester.path / "golden/holdout"
    for folder in (gen / "fixtures", hold / "fixtures"):
        folder.mkdir(parents=True)
    ev = res / "eval/generation"
    for name in ("golden-generation.jsonl", "dataset.json"):
        shutil.copy(ev / name, gen / name)
    for name in ("golden-holdout.jsonl", "dataset.json"):
        shutil.copy(ev / "holdout" / name, hold / name)
    for src, dst in (
        (ev / "fixtures", gen / "fixtures"),
        (inferred / "eval/generation/fixtures", gen / "fixtures"),
        (ev / "holdout/fixtures", hold / "fixtures"),
        (inferred / "eval/generation/holdout/fixtures", hold / "fixtures"),
    ):
        for f in src.glob("*.out.md"):
            shutil.copy(f, dst / f.name)
    # The reference's manifests predate profiles; in a goldeval project its datasets name
    # the profile that carries the reference's rules (the bundled golden/ datasets do too).
    for folder in (gen, hold):
        manifest = json.loads((folder / "dataset.json").read_text("utf-8"))
        manifest["profile"] = "java-autotest"
        (folder / "dataset.json").write_text(json.dumps(manifest), "utf-8")
    shutil.copytree(res / "pack", pytester.path / "pack")
    pytester.makeini("[pytest]\n")
    return pytester.path


@pytest.mark.parametrize("dataset", ["generation-v1", "holdout-v1"])
def test_reference_fixture_figures(
    pytester: pytest.Pytester, reference_project: Path, dataset: str, plugin_args: list[str]
) -> None:
    result = pytester.runpytest(f"--golden={dataset}", *plugin_args)
    assert result.ret == 0, result.stdout.str()
    run = RunFiles(reference_project).latest()
    expected = json.loads((REFERENCE / "baselines" / f"{dataset}.json").read_text("utf-8"))
    assert run["datasetHash"] == expected["datasetHash"]
    for key in COUNTERS:
        assert run[key] == expected[key], key
    for name in RATES:
        got = run["metrics"][name]
        want = expected["metrics"][name]
        assert (got["hits"], got["total"]) == (want["hits"], want["total"]), name
    got_slices = {k: (v["hits"], v["total"]) for k, v in run["metrics"]["slices"].items()}
    want_slices = {k: (v["hits"], v["total"]) for k, v in expected["metrics"]["slices"].items()}
    assert got_slices == want_slices
    assert run["metrics"]["weightedScore"] == expected["metrics"]["weightedScore"]
    assert run["metrics"]["weightedScoreFormula"] == expected["metrics"]["weightedScoreFormula"]
    by_id = {c["caseId"]: c for c in run["cases"]}
    for case in expected["cases"]:
        ours = by_id[case["caseId"]]
        assert ours["status"] == case["status"]
        assert set(ours["kinds"]) == set(case["kinds"])
        assert ours["retrieval"] == case["retrieval"]
        assert ours["contract"] == case["contract"]

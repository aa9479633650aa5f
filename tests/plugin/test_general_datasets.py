"""General-purpose rows (no pack, no contract keys) through pytest: graders, options, hooks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goldeval.dataset.rows import load_dataset
from goldeval.graders.contract import ContractGrader
from goldeval.graders.registry import builtin_graders
from goldeval.results.run_document import config_fingerprint
from tests.helpers import SERIAL_ONLY, RunFiles

ROWS = [
    {
        "id": "ship",
        "prompt": "How long does shipping take?",
        "expect": {"contains_any": ["3-5 days", "three to five days"], "cites": ["shipping"]},
    },
    {"id": "total", "prompt": "Total for 2 books at 12.50?", "expect": {"number": {"value": 25.0}}},
    {
        "id": "json",
        "prompt": "Order status as JSON",
        "expect": {
            "json_schema": {
                "type": "object",
                "required": ["status"],
                "properties": {"status": {"enum": ["open", "shipped"]}},
            }
        },
    },
    {
        "id": "polite",
        "prompt": "Say thanks",
        "expect": {"equals": "thank you!", "normalize": "all"},
        "must_not": ["idiot"],
    },
]
ANSWERS = {
    "ship": "Shipping takes 3-5 days (see shipping).",
    "total": "That is 25.00 in total.",
    "json": '```json\n{"status": "lost"}\n```',
    "polite": "Thank you",
}


@pytest.fixture
def faq_project(pytester: pytest.Pytester) -> Path:
    ds = pytester.path / "golden" / "faq"
    (ds / "fixtures").mkdir(parents=True)
    (ds / "dataset.yaml").write_text(
        "version: faq-v1\nname: faq\npack: none\n"
        "grader_options:\n  cites:\n    pattern: '\\(see ([a-z-]+)\\)'\n"
        "gate:\n  fixture:\n    thresholds: {overallPassRate: 0.7}\n",
        encoding="utf-8",
    )
    (ds / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    for case_id, text in ANSWERS.items():
        (ds / "fixtures" / f"{case_id}.out.md").write_text(text, encoding="utf-8")
    pytester.makeini("[pytest]\n")
    return pytester.path


@SERIAL_ONLY
def test_general_graders_with_manifest_options(
    pytester: pytest.Pytester, faq_project: Path, plugin_args: list[str]
) -> None:
    result = pytester.runpytest("--golden=faq-v1", *plugin_args)
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*json_schema*$.status*"])
    run = RunFiles(faq_project).latest()
    graders = run["metrics"]["graders"]
    assert graders["cites"]["hits"] == 1  # the custom citation pattern from the manifest
    assert graders["json_schema"] == {**graders["json_schema"], "hits": 0, "total": 1}
    assert run["metrics"]["contractPassRate"]["total"] == 0  # no contract keys: not graded
    # 3/4 = 0.75 passes the 0.7 threshold: the gate decides, not pytest's "a test failed"
    assert run["exitDecision"]["code"] == 0
    assert result.ret == 0


def test_users_own_failing_test_still_fails_the_session(
    pytester: pytest.Pytester, faq_project: Path
) -> None:
    pytester.makepyfile(test_mine="def test_broken():\n    assert False\n")
    result = pytester.runpytest("--golden=faq-v1", "test_mine.py")
    result.assert_outcomes(passed=3, failed=2)
    assert result.ret == 1


def test_grader_can_be_switched_soft_in_the_manifest(
    pytester: pytest.Pytester, faq_project: Path
) -> None:
    manifest = faq_project / "golden/faq/dataset.yaml"
    manifest.write_text(manifest.read_text() + "graders:\n  json_schema: soft\n")
    result = pytester.runpytest("--golden=faq-v1")
    result.assert_outcomes(passed=4)
    run = RunFiles(faq_project).latest()
    assert "json_schema" not in run["metrics"]["graders"]


def test_unknown_expect_key_is_a_collection_error(
    pytester: pytest.Pytester, faq_project: Path
) -> None:
    rows = faq_project / "golden/faq/rows.jsonl"
    rows.write_text(
        rows.read_text()
        + json.dumps({"id": "typo", "prompt": "x", "expect": {"contains_anyy": ["a"]}})
        + "\n"
    )
    result = pytester.runpytest("--golden=faq-v1")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*rows.jsonl:5: expect.contains_anyy: unknown expect key (did you mean 'contains_any'?)*"]
    )


def test_bad_json_schema_is_a_collection_error(
    pytester: pytest.Pytester, faq_project: Path
) -> None:
    rows = faq_project / "golden/faq/rows.jsonl"
    rows.write_text(
        rows.read_text()
        + json.dumps(
            {
                "id": "bad-schema",
                "prompt": "x",
                "expect": {"json_schema": {"properties": {"n": {"type": "float"}}}},
            }
        )
        + "\n"
    )
    result = pytester.runpytest("--golden=faq-v1")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*rows.jsonl:5: expect.json_schema: #/properties/n/type: 'float' is not one of*"]
    )
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_protocol_names_the_json_schema_grader_version(
    pytester: pytest.Pytester, faq_project: Path
) -> None:
    """json_schema is version 2 (the jsonschema library): a baseline of version 1 has another
    graderConfigHash, so it is incomparable instead of silently compared."""
    pytester.runpytest("--golden=faq-v1")
    run = RunFiles(faq_project).latest()
    graders = [ContractGrader(), *builtin_graders()]
    ds = load_dataset(
        faq_project / "golden/faq",
        project_root=faq_project,
        graders=graders,
        require_fixtures=False,
    )
    used = [g for g in graders if any(g.applies(c) for c in ds.cases)]
    names = sorted(g.config_name for g in used)
    assert "json_schema@v2" in names
    assert run["protocol"]["graderConfigHash"] == config_fingerprint(ds.grader_config(names))
    assert run["protocol"]["graderConfigHash"] != config_fingerprint(
        ds.grader_config(sorted(g.name for g in used))
    )


def test_third_party_provider_through_the_hook(
    pytester: pytest.Pytester, faq_project: Path
) -> None:
    pytester.makeconftest(
        """
        from goldeval import Answer, Provider

        class Canned(Provider):
            name = "canned"
            def complete(self, request):
                return Answer(text="Shipping takes 3-5 days (see shipping).", input_tokens=3,
                              output_tokens=7, cost=0.001)

        def pytest_goldeval_make_provider(config, name, settings):
            return Canned() if name == "canned" else None
        """
    )
    result = pytester.runpytest(
        "--golden=faq-v1",
        "--golden-mode=live",
        "--golden-provider=canned",
        "--golden-model=x",
        "--golden-no-gate",
        "-k",
        "ship",
    )
    result.assert_outcomes(passed=1, deselected=3)
    run = RunFiles(faq_project).latest()
    assert run["protocol"]["provider"] == "canned"
    assert run["metrics"]["tokens"] == {
        "inputTokens": 3,
        "outputTokens": 7,
        "totalTokens": 10,
        "estimatedCost": 0.001,
    }


def test_unknown_provider_is_a_usage_error(pytester: pytest.Pytester, faq_project: Path) -> None:
    result = pytester.runpytest("--golden=faq-v1", "--golden-mode=live", "--golden-provider=nope")
    assert result.ret != 0
    assert "unknown provider 'nope'" in result.stdout.str() + result.stderr.str()

"""Profiles through pytest: a dataset without one gets generic rules, java-autotest keeps the
reference's; prompt templates and conversation rows in fixture mode."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import goldeval.pipeline.attempt  # noqa: F401  (loaded once, outside pytester's runs)
from goldeval.reports.html import render_summary
from goldeval.results.documents import typed_run
from tests.helpers import ROOT, SERIAL_ONLY, RunFiles

ROWS = [
    {
        "id": "ship",
        "prompt": "How long does shipping take?",
        "expect": {"contains_any": ["3-5 days"]},
        "tags": ["shipping"],
    },
    {
        "id": "refund",
        "prompt": "Can I get a refund?",
        "expect": {"contains_any": ["30 days"]},
        "tags": ["returns"],
    },
    {
        "id": "joke",
        "prompt": "Tell me a joke",
        "expect": {"contains_any": ["only help"], "red": True},
        "tags": ["returns"],
    },
]
ANSWERS = {"ship": "It takes 3-5 days.", "refund": "Within 30 days.", "joke": "Ha ha."}


def _dataset(root: Path, manifest: str, rows: list[dict], answers: dict[str, str]) -> Path:
    ds = root / "golden" / "bot"
    (ds / "fixtures").mkdir(parents=True, exist_ok=True)
    (ds / "dataset.yaml").write_text(manifest, encoding="utf-8")
    (ds / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", "utf-8")
    for case_id, text in answers.items():
        (ds / "fixtures" / f"{case_id}.out.md").write_text(text, encoding="utf-8")
    return ds


@pytest.fixture
def generic_project(pytester: pytest.Pytester) -> Path:
    """A generic dataset in a project that also has the reference's pack/ folder."""
    shutil.copytree(ROOT / "pack", pytester.path / "pack")
    _dataset(pytester.path, "version: bot-v1\n", ROWS, ANSWERS)
    pytester.makeini("[pytest]\n")
    return pytester.path


@SERIAL_ONLY
def test_generic_dataset_gets_no_pack_no_reference_rates(
    pytester: pytest.Pytester, generic_project: Path, plugin_args: list[str]
) -> None:
    result = pytester.runpytest("--golden=bot-v1", "--golden-no-gate", *plugin_args)
    result.assert_outcomes(passed=2, failed=1)
    run = RunFiles(generic_project).latest()
    # the project's pack/ is not picked up silently
    assert run["protocol"]["packId"] is None and run["protocol"]["packHash"] is None
    assert run["protocol"]["profile"] == "generic"
    metrics = run["metrics"]
    # red: true adds no "Negative" rate; slices are the tags
    assert metrics["negativeCasePassRate"]["total"] == 0
    assert set(metrics["slices"]) == {"tag:shipping", "tag:returns"}
    assert metrics["slices"]["tag:returns"]["hits"] == 1
    assert metrics["slices"]["tag:returns"]["total"] == 2
    assert metrics["graders"]["contains_any"]["total"] == 3
    out = result.stdout.str()
    for label in ("Contract", "Negative", "Hallucination", "Refusal", "Retrieval", "RAG  "):
        assert label not in out, label
    assert "Overall" in out and "grader contains_any" in out
    report = (RunFiles(generic_project).latest_dir() / "report.md").read_text("utf-8")
    for label in ("| Contract |", "| Negative |", "| Refusal |", "| RAG |", "Weighted"):
        assert label not in report, label
    assert "| Overall |" in report and "Slice tag:returns" in report
    html = render_summary(typed_run(run))
    assert "Overall" in html and "Grader contains_any" in html
    for label in ("Contract", "Negative", "Refusal", "Hallucination"):
        assert label not in html, label


def test_java_autotest_profile_keeps_the_reference_rules(
    pytester: pytest.Pytester, generic_project: Path
) -> None:
    manifest = generic_project / "golden/bot/dataset.yaml"
    manifest.write_text("version: bot-v1\nprofile: java-autotest\n", encoding="utf-8")
    result = pytester.runpytest("--golden=bot-v1", "--golden-no-gate")
    result.assert_outcomes(passed=2, failed=1)
    run = RunFiles(generic_project).latest()
    assert run["protocol"]["packId"] == "pack-v1"  # the project pack/, as before profiles
    assert run["protocol"]["profile"] == "java-autotest"
    assert run["metrics"]["negativeCasePassRate"]["total"] == 1  # the red row
    assert "generation" in run["metrics"]["slices"]
    assert "Negative" in result.stdout.str()


def test_profile_enters_the_grader_config_hash(
    pytester: pytest.Pytester, generic_project: Path
) -> None:
    manifest = generic_project / "golden/bot/dataset.yaml"
    manifest.write_text("version: bot-v1\npack: none\n", encoding="utf-8")
    assert pytester.runpytest("--golden=bot-v1", "--golden-no-gate").ret == 1
    generic = RunFiles(generic_project).latest()["protocol"]["graderConfigHash"]
    manifest.write_text("version: bot-v1\npack: none\nprofile: java-autotest\n", "utf-8")
    assert pytester.runpytest("--golden=bot-v1", "--golden-no-gate").ret == 1
    reference = RunFiles(generic_project).latest()["protocol"]["graderConfigHash"]
    assert generic != reference


@pytest.mark.parametrize(
    ("manifest", "field", "words"),
    [
        ("version: bot-v1\nprofile: java-autotst\n", "profile", "did you mean 'java-autotest'"),
        (
            "version: bot-v1\ngate:\n  fixture:\n    thresholds: {negativeCasePassRate: 1.0}\n",
            "gate.fixture.thresholds.negativeCasePassRate",
            "profile is generic",
        ),
        ("version: bot-v1\nrequest: {temperature: 7}\n", "request.temperature", "less than"),
        ("version: bot-v1\nrequest: {max_tokns: 5}\n", "request.max_tokns", "unknown option"),
        ("version: bot-v1\nprompt: {user: '{{ x '}\n", "prompt.user", "syntax error"),
        ("version: bot-v1\ntruncated: maybe\n", "truncated", "hard, soft or off"),
    ],
)
def test_bad_manifest_is_a_clear_collection_error(
    pytester: pytest.Pytester, generic_project: Path, manifest: str, field: str, words: str
) -> None:
    (generic_project / "golden/bot/dataset.yaml").write_text(manifest, encoding="utf-8")
    result = pytester.runpytest("--golden=bot-v1")
    assert result.ret not in (0, 1)
    out = result.stdout.str() + result.stderr.str()
    assert "dataset.yaml" in out and field in out and words in out, out
    assert "Traceback" not in out


TEMPLATED = [
    {
        "id": "ship",
        "vars": {"question": "How long does shipping take?", "tone": "brief"},
        "expect": {"contains_any": ["3-5 days"]},
    },
    {
        "id": "refund",
        "vars": {"question": "Can I get a refund?", "tone": "kind"},
        "expect": {"contains_any": ["30 days"]},
    },
]
TEMPLATE_MANIFEST = (
    "version: bot-v1\n"
    "prompt:\n"
    "  system: 'You are the bookshop bot. Be {{ tone }}.'\n"
    "  user: 'Customer asks: {{ question }}'\n"
)


@SERIAL_ONLY
def test_template_rows_render_and_failing_cases_show_their_messages(
    pytester: pytest.Pytester, plugin_args: list[str]
) -> None:
    rows = [dict(r, prompt=r["vars"]["question"]) for r in TEMPLATED]
    _dataset(pytester.path, TEMPLATE_MANIFEST, rows, {"ship": "3-5 days", "refund": "No."})
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest("--golden=bot-v1", "--golden-no-gate", *plugin_args)
    result.assert_outcomes(passed=1, failed=1)
    files = RunFiles(pytester.path)
    report = (files.latest_dir() / "report.md").read_text("utf-8")
    assert "You are the bookshop bot. Be kind." in report
    assert "Customer asks: Can I get a refund?" in report
    assert "Be brief." not in report  # a passing case's messages are not shown


def test_template_variable_the_row_lacks_is_a_collection_error(pytester: pytest.Pytester) -> None:
    rows = [
        TEMPLATED[0],
        {
            "id": "refund",
            "prompt": "Refund?",
            "vars": {"question": "Refund?"},
            "expect": {"contains_any": ["30 days"]},
        },
    ]
    _dataset(pytester.path, TEMPLATE_MANIFEST, rows, {"ship": "3-5 days", "refund": "30 days"})
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest("--golden=bot-v1")
    assert result.ret not in (0, 1)
    out = result.stdout.str() + result.stderr.str()
    assert "rows.jsonl:2" in out and "prompt.system" in out and "tone" in out, out
    assert "Traceback" not in out


def test_changing_a_template_changes_the_protocol(pytester: pytest.Pytester) -> None:
    rows = [dict(r, prompt=r["vars"]["question"]) for r in TEMPLATED]
    ds = _dataset(pytester.path, TEMPLATE_MANIFEST, rows, {"ship": "3-5 days", "refund": "30"})
    pytester.makeini("[pytest]\n")
    pytester.runpytest("--golden=bot-v1", "--golden-no-gate")
    before = RunFiles(pytester.path).latest()["protocol"]["graderConfigHash"]
    (ds / "dataset.yaml").write_text(TEMPLATE_MANIFEST.replace("Be {{", "Please be {{"), "utf-8")
    pytester.runpytest("--golden=bot-v1", "--golden-no-gate")
    after = RunFiles(pytester.path).latest()["protocol"]["graderConfigHash"]
    assert before != after


CONVERSATION = {
    "id": "order-status",
    "messages": [
        {"role": "user", "content": "Where is my order 42?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"name": "order_status", "arguments": {"order": 42}}],
        },
        {"role": "tool", "content": '{"status": "shipped"}', "tool_call_id": "call_0"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "And this parcel?"},
                {"type": "image", "path": "parcel.png"},
            ],
        },
    ],
    "expect": {"contains_any": ["shipped"]},
}
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
)


def test_conversation_row_runs_in_fixture_mode(pytester: pytest.Pytester) -> None:
    ds = _dataset(
        pytester.path, "version: bot-v1\n", [CONVERSATION], {"order-status": "It has shipped."}
    )
    (ds / "parcel.png").write_bytes(PNG)
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest("--golden=bot-v1", "--golden-no-gate")
    result.assert_outcomes(passed=1)
    case = RunFiles(pytester.path).latest()["cases"][0]
    assert case["metadata"]["prompt"] == "And this parcel?"  # the last user turn's text


@pytest.mark.parametrize(
    ("turns", "field", "words"),
    [
        ([{"role": "robot", "content": "hi"}], "messages[0].role", "must be one of"),
        (
            [{"role": "user", "content": [{"type": "image", "path": "nope.png"}]}],
            "messages[0].content[0]",
            "no file",
        ),
        (
            [{"role": "user", "content": [{"type": "image", "path": "../../pytest.ini"}]}],
            "messages[0].content[0]",
            "outside the dataset folder",
        ),
        (
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
            "messages[1].role",
            "last turn",
        ),
    ],
)
def test_bad_conversation_names_the_turn(
    pytester: pytest.Pytester, turns: list[dict], field: str, words: str
) -> None:
    row = {"id": "c", "messages": turns, "expect": {"contains_any": ["x"]}}
    _dataset(pytester.path, "version: bot-v1\n", [row], {"c": "x"})
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest("--golden=bot-v1")
    assert result.ret not in (0, 1)
    out = result.stdout.str() + result.stderr.str()
    assert "rows.jsonl:1" in out and field in out and words in out, out


def test_conversation_changes_the_dataset_hash(pytester: pytest.Pytester) -> None:
    ds = _dataset(
        pytester.path, "version: bot-v1\n", [CONVERSATION], {"order-status": "It has shipped."}
    )
    (ds / "parcel.png").write_bytes(PNG)
    pytester.makeini("[pytest]\n")
    pytester.runpytest("--golden=bot-v1", "--golden-no-gate")
    before = RunFiles(pytester.path).latest()["datasetHash"]
    (ds / "parcel.png").write_bytes(PNG + b"\0")
    pytester.runpytest("--golden=bot-v1", "--golden-no-gate")
    assert RunFiles(pytester.path).latest()["datasetHash"] != before

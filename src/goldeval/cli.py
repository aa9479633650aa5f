"""``goldeval``: the command line outside pytest (no model calls unless asked).

goldeval compare BASELINE CANDIDATE   compare two saved runs; same exit codes as pytest
goldeval gate RUN                     gate a saved run.json (baseline lookup as in pytest)
goldeval calibrate --golden=ID        judge calibration (canned outputs, or --live)
goldeval site --out DIR               static history site from the run folders
goldeval runs | show | export         the run store (see docs/configuration.md)
goldeval verify RUN_DIR               check a run folder against its manifest.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from goldeval.errors import GoldevalError

USAGE = 4
DEFAULT_STORE = os.environ.get("GOLDEVAL_STORE") or ".goldeval/goldeval.sqlite3"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"goldeval: error: {message}", file=sys.stderr)
        raise SystemExit(USAGE)


def _load_json(path: Path) -> dict[str, Any]:
    from goldeval.baseline import load_baseline

    return load_baseline(path)


def _policy(run: dict[str, Any], golden_root: Path, live: bool) -> Any:
    """The gate policy from the manifest of the run's dataset, found under the golden root."""
    from goldeval.dataset import discover
    from goldeval.decide import policy_from_manifest
    from goldeval.manifest import find_manifest, read_manifest

    dataset_id = (run.get("protocol") or {}).get("datasetId") or run.get("datasetVersion")
    folder = discover(golden_root).get(str(dataset_id))
    if folder is None:
        return None
    manifest_path = find_manifest(folder)
    if manifest_path is None:
        return None
    return policy_from_manifest(read_manifest(manifest_path), live)


def _is_live(run: dict[str, Any]) -> bool:
    from goldeval.comparison import run_mode

    return run_mode(run) == "LIVE"


def _finish(
    run: dict[str, Any],
    baseline: dict[str, Any] | None,
    golden_root: Path,
    no_gate: bool,
    as_json: bool,
) -> int:
    from goldeval.comparison import compare
    from goldeval.exitcodes import decide_exit
    from goldeval.gate import attach_gate, evaluate
    from goldeval.report_md import render_comparison

    live = _is_live(run)
    comparison = compare(baseline, run) if baseline is not None else None
    gate = None
    policy = _policy(run, golden_root, live)
    if not no_gate and (policy is not None or live):
        gate = evaluate(run, policy, baseline, comparison, live=live)
        if comparison is not None:
            comparison = attach_gate(comparison, gate)
    decision = decide_exit(run, comparison if not no_gate else None, gate, pytest_status=0)
    if as_json:
        print(
            json.dumps(
                {
                    "comparison": comparison.dump() if comparison else None,
                    "qualityGate": gate.dump() if gate else None,
                    "exitDecision": {"code": decision.code, "reason": decision.reason},
                },
                indent=2,
                ensure_ascii=False,
            )
        )
    else:
        if comparison is not None:
            print(render_comparison(comparison.dump()))
        if gate is not None:
            print(f"\nQuality gate: {gate.verdict}")
            for rule in gate.rules:
                print(f"  {'PASS' if rule.passed else 'FAIL'} {rule.name}: {rule.detail}")
        print(f"\ngoldeval decision: exit {decision.code} — {decision.reason}")
    return decision.code


def cmd_compare(args: argparse.Namespace) -> int:
    baseline = _load_json(Path(args.baseline))
    candidate = _load_json(Path(args.candidate))
    return _finish(candidate, baseline, Path(args.golden_root), args.no_gate, args.json)


def cmd_gate(args: argparse.Namespace) -> int:
    from goldeval.baseline import default_candidates, first_comparable

    if args.run_key:
        from goldeval import store_cli

        store = store_cli._open(args.store)
        try:
            run = store_cli.run_document(store, args.run_key)
        finally:
            store.close()
    elif args.run:
        run = _load_json(Path(args.run))
    else:
        raise GoldevalError("give a run.json or --run-key KEY")
    baseline = None
    if args.baseline:
        baseline = _load_json(Path(args.baseline))
    else:
        dataset_id = (run.get("protocol") or {}).get("datasetId") or run.get("datasetVersion")
        candidates = default_candidates(Path(args.baselines), str(dataset_id), _is_live(run))
        found = first_comparable(candidates, run)
        baseline = found[1] if found is not None else None
    return _finish(run, baseline, Path(args.golden_root), args.no_gate, args.json)


def cmd_calibrate(args: argparse.Namespace) -> int:
    from goldeval.calibration import calibrate, load_calibration
    from goldeval.dataset import resolve_dataset

    folder = resolve_dataset(args.golden, Path(args.golden_root), Path.cwd())
    path = folder / "calibration.jsonl"
    if not (path.exists() or path.is_symlink()):
        raise GoldevalError("no calibration.jsonl in the dataset folder", path=folder)
    from goldeval.safe_files import contained_file

    # A link out of the dataset folder or a FIFO is refused before anything is opened.
    rows = load_calibration(contained_file(path, folder, what="calibration corpus"))
    if args.live:
        predict = _live_judge(args, folder)
        report = calibrate(rows, predict, live=True)
    else:
        report = calibrate(rows)
    out = Path(args.out) / "calibration"
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(
        json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    markdown = report.to_markdown()
    (out / "report.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    print(f"written to {out}")
    return 0


def _dataset_cases(folder: Path) -> list[Any]:
    """The dataset's rows, read by the same loader pytest uses (built-in graders' keys)."""
    from goldeval.dataset import load_dataset
    from goldeval.graders.contract import ContractGrader
    from goldeval.graders.general import builtin_graders

    graders = [ContractGrader(), *builtin_graders()]
    dataset = load_dataset(folder, project_root=Path.cwd(), graders=graders, require_fixtures=False)
    return dataset.cases


def _live_judge(args: argparse.Namespace, folder: Path) -> Any:
    from goldeval.cases import GoldenCase
    from goldeval.judge import build_judge_messages, parse_judge_output
    from goldeval.judging import DEFAULT_RUBRIC
    from goldeval.providers.base import ProviderRequest
    from goldeval.providers.http import make_http_provider
    from goldeval.settings import provider_from_env

    settings = provider_from_env(args.provider, args.judge_model, args.base_url)
    provider = make_http_provider(settings)
    rubric_path = folder / "rubric.md"
    rubric = rubric_path.read_text(encoding="utf-8") if rubric_path.is_file() else DEFAULT_RUBRIC
    cases = {c.id: c for c in _dataset_cases(folder)}

    def predict(row: Any) -> Any:
        case = cases.get(row.case_id) or GoldenCase(row.case_id, "", {})
        candidate = row.candidate
        if candidate is None:
            fixture = folder / "fixtures" / f"{row.case_id}.out.md"
            candidate = fixture.read_text(encoding="utf-8") if fixture.is_file() else ""
        system, user = build_judge_messages(
            rubric, case.id, case.prompt, case.expect, list(case.must_not), [], candidate
        )
        answer = provider.complete(
            ProviderRequest(
                case=case, attempt=1, system=system, user=user, model=settings.model, retrieved=[]
            )
        )
        return parse_judge_output(answer.text)

    return predict


def cmd_site(args: argparse.Namespace) -> int:
    from goldeval import site

    return int(site.main_site(["--out", args.out, "--runs", args.runs]))


def cmd_store(args: argparse.Namespace) -> int:
    from goldeval import store_cli

    return int(store_cli.run(args))


def cmd_verify(args: argparse.Namespace) -> int:
    from goldeval.evidence import verify_run_dir

    problems = verify_run_dir(Path(args.run_dir))
    for p in problems:
        print(p)
    if problems:
        print(f"goldeval verify: {len(problems)} problem(s)")
        return 65
    print("goldeval verify: every artifact present and unchanged")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="goldeval", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--golden-root", default="golden", help="datasets folder (gate policy)")
        p.add_argument("--no-gate", action="store_true", help="report without gating")
        p.add_argument("--json", action="store_true", help="print the decision as JSON")

    p = sub.add_parser("compare", help="compare two saved runs (run.json or baselines)")
    p.add_argument("baseline")
    p.add_argument("candidate")
    common(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("gate", help="gate a saved run.json, or a whole run key from the store")
    p.add_argument("run", nargs="?", default=None)
    p.add_argument("--run-key", default=None, help="gate every attempt stored under this key")
    p.add_argument(
        "--store",
        default=DEFAULT_STORE,
        help="SQLite path or postgresql:// URL (with --run-key; default GOLDEVAL_STORE, else "
        ".goldeval/goldeval.sqlite3)",
    )
    p.add_argument("--baseline", default=None)
    p.add_argument("--baselines", default="baselines", help="folder of the default lookup")
    common(p)
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser("calibrate", help="judge calibration over calibration.jsonl")
    p.add_argument("--golden", required=True, metavar="ID")
    p.add_argument("--golden-root", default="golden")
    p.add_argument("--out", default=".goldeval")
    p.add_argument("--live", action="store_true", help="re-judge with a live judge model")
    p.add_argument("--provider", default="ollama")
    p.add_argument("--judge-model", default=None)
    p.add_argument("--base-url", default=None)
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("site", help="render the runs into a static site")
    p.add_argument("--out", required=True)
    p.add_argument("--runs", default=".goldeval/runs")
    p.set_defaults(func=cmd_site)

    for name, helptext in (
        ("runs", "list runs in the store"),
        ("show", "show one run"),
        ("export", "write a run's run.json from the store"),
    ):
        p = sub.add_parser(name, help=helptext)
        if name != "runs":
            p.add_argument("run", help="run id or run key")
        p.add_argument(
            "--store",
            default=DEFAULT_STORE,
            help="SQLite path or postgresql:// URL (default GOLDEVAL_STORE, else "
            ".goldeval/goldeval.sqlite3)",
        )
        if name == "export":
            p.add_argument("--out", default=None, help="file (default: stdout)")
        p.set_defaults(func=cmd_store)

    p = sub.add_parser("verify", help="check a run folder's artifacts against manifest.json")
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_verify)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except GoldevalError as exc:
        print(f"goldeval: {exc}", file=sys.stderr)
        code = 65 if type(exc).__name__ == "BaselineError" else USAGE
        return code
    except KeyboardInterrupt:
        return 2
    except BrokenPipeError:  # `goldeval show RUN | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""``goldeval``: the command line outside pytest (no model calls unless asked).

goldeval compare BASELINE CANDIDATE   compare two saved runs; same exit codes as pytest
goldeval gate [RUN]                   gate a saved run (baseline lookup as in pytest)
goldeval show [RUN]                   a saved run's report
goldeval calibrate --golden=ID        judge calibration (canned outputs, or --live)
goldeval site --out DIR               static history site from the run folders
goldeval runs | export                the run store (see docs/configuration.md)
goldeval verify RUN_DIR               check a run folder against its manifest.json
goldeval prune --keep-last N | --older-than DAYS   delete old run folders and store runs
goldeval init [NAME]                  scaffold a dataset a newcomer can run at once
goldeval serve | worker               the evaluation service (extra [server], docs/service.md)

RUN (and BASELINE, CANDIDATE): a run.json or baseline file, a run folder, the LATEST pointer,
a run id (a folder under the runs folder, or in the store) or a run key; gate and show
without RUN take the latest run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from goldeval.cli import prune
from goldeval.core import limits
from goldeval.core.errors import GoldevalError
from goldeval.core.textsafe import one_line, safe_text
from goldeval.verdict import exit_codes

if TYPE_CHECKING:
    from goldeval.cli.runs import ResolvedRun
    from goldeval.results.documents import RunDocument

#: What a RUN argument may be (goldeval.cli.runs.resolve_run).
RUN_HELP = (
    "a run.json or baseline file, a run folder, the LATEST pointer, a run id (folder name or "
    "store id) or a run key"
)

#: The run store, the runs folder and the datasets under the project root (as in pytest).
DEFAULT_STORE = ".goldeval/goldeval.sqlite3"
DEFAULT_RUNS = ".goldeval/runs"


def project_root(explicit: str | None = None) -> Path:
    """The project root of every ``goldeval`` command: ``--root``, else the nearest folder at or
    above the working directory with a pytest configuration file (pytest's rootdir for the
    plugin), else the working directory. Defaults (store, runs, golden/, baselines/) live
    under it, so a command started in any subfolder sees what pytest wrote.
    """
    from goldeval.cli.scaffold import find_project_root

    if explicit:
        root = Path(explicit).resolve()
        if not root.is_dir():
            raise GoldevalError("--root: not a folder", path=explicit)
        return root
    cwd = Path.cwd().resolve()
    return find_project_root(cwd) or cwd


def store_location(args: argparse.Namespace) -> str:
    """The store a command reads: ``--store`` (relative to the working directory, like any
    path given on the command line), else ``GOLDEVAL_STORE`` (relative to the project root, as
    the plugin reads it), else ``<project root>/.goldeval/goldeval.sqlite3``."""
    explicit = getattr(args, "store", None)
    if explicit:
        return str(explicit)
    url = os.environ.get("GOLDEVAL_STORE") or DEFAULT_STORE
    if "://" in url or Path(url).is_absolute():
        return url
    return str(project_root(getattr(args, "root", None)) / url)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"goldeval: error: {message}", file=sys.stderr)
        raise SystemExit(exit_codes.USAGE)


def _dataset_id(run: dict[str, Any]) -> str | None:
    """The run's dataset id (``protocol.datasetId``, else ``datasetVersion``); shapes are checked
    by load_baseline, so both are strings or absent here."""
    protocol = run.get("protocol")
    value = protocol.get("datasetId") if isinstance(protocol, dict) else None
    value = value or run.get("datasetVersion")
    return value if isinstance(value, str) and value else None


class Project:
    """Where a saved run's gate policy and baselines live (see :func:`find_project`)."""

    def __init__(self, root: Path | None, golden_root: Path | None, dataset_dir: Path | None):
        self.root = root
        self.golden_root = golden_root
        self.dataset_dir = dataset_dir
        self.looked_in: list[str] = []
        #: Manifests that could not be read on the way (one of them may be the run's dataset).
        self.problems: list[str] = []


def _relative_golden(run: dict[str, Any]) -> Path:
    """The golden root's path inside the project, as the run recorded it (default golden)."""
    root, golden = run.get("projectRoot"), run.get("goldenRoot")
    if isinstance(root, str) and isinstance(golden, str):
        try:
            return Path(golden).relative_to(root)
        except ValueError:
            pass
    return Path("golden")


def find_project(run: dict[str, Any], args: argparse.Namespace, *anchors: Path | None) -> Project:
    """Find the project a saved run belongs to: never the working directory by accident.

    Order: ``--golden-root`` (the datasets folder itself, relative to the working directory);
    ``--root``; the ``projectRoot`` recorded in the run by pytest; the folders above each
    anchor (the run file, the baseline file, the store) nearest first; the working directory.
    A candidate counts only if its golden root holds the run's dataset id, so a project
    without that dataset is never used for its policy.
    """
    from goldeval.dataset.rows import discover

    dataset_id = _dataset_id(run)
    golden_rel = _relative_golden(run)
    explicit_golden = getattr(args, "golden_root", None)
    explicit_root = getattr(args, "root", None)
    candidates: list[tuple[Path, Path]] = []  # (project root, golden root)
    if explicit_golden:
        golden = Path(explicit_golden).resolve()
        root = Path(explicit_root).resolve() if explicit_root else golden.parent
        candidates.append((root, golden))
    elif explicit_root:
        root = Path(explicit_root).resolve()
        if not root.is_dir():
            raise GoldevalError("--root: not a folder", path=explicit_root)
        candidates.append((root, root / golden_rel))
    else:
        recorded_root, recorded_golden = run.get("projectRoot"), run.get("goldenRoot")
        if isinstance(recorded_root, str) and isinstance(recorded_golden, str):
            candidates.append((Path(recorded_root), Path(recorded_golden)))
        for anchor in anchors:
            if anchor is None:
                continue
            start = anchor.resolve()
            for folder in [start, *start.parents] if start.is_dir() else start.parents:
                candidates.append((folder, folder / golden_rel))
        cwd = Path.cwd().resolve()
        root = project_root()
        candidates.append((root, root / golden_rel))
        candidates.append((cwd, cwd / golden_rel))
    project = Project(None, None, None)
    seen: set[Path] = set()
    for cand_root, cand_golden in candidates:
        if cand_golden in seen:
            continue
        seen.add(cand_golden)
        if not cand_golden.is_dir():
            continue
        project.looked_in.append(str(cand_golden))
        if dataset_id is None:
            continue
        dataset_dir = discover(cand_golden, project.problems).get(dataset_id)
        if dataset_dir is not None:
            project.root, project.golden_root = cand_root, cand_golden
            project.dataset_dir = dataset_dir
            return project
    if explicit_root or explicit_golden:
        # An explicit place: its baselines are used even when its datasets are not.
        project.root, project.golden_root = candidates[0]
    return project


def _is_live(run: RunDocument) -> bool:
    from goldeval.verdict.comparison import run_mode

    return run_mode(run) == "LIVE"


def _no_project(run: dict[str, Any], project: Project) -> GoldevalError:
    dataset = _dataset_id(run)
    looked = ", ".join(project.looked_in) if project.looked_in else "no golden folder found"
    what = f"dataset {dataset!r}" if dataset else "a dataset id (protocol.datasetId)"
    broken = "".join(f"\n  unreadable manifest: {p}" for p in dict.fromkeys(project.problems))
    return GoldevalError(
        f"no gate policy: the run names {what}, but no project here has it "
        f"(looked in: {looked}){broken}\n ",
        hint="pass --root PROJECT (the folder holding golden/ and baselines/), or --no-gate to "
        "report without gating",
    )


def _print_verdict(verdict: Any, cut: Any, policy_from: str | None) -> None:
    """The terminal lines of a decision: the comparison and the gate, or what cut the run
    short (a comparison of a run that did not finish its selection says nothing)."""
    from goldeval.reports.markdown import render_comparison

    if policy_from is not None:
        print(f"dataset and gate policy: {policy_from}")
    if cut is not None:
        print(f"run {cut.status}: {one_line(cut.reason)}")
        print("not compared or gated: a run that did not grade its selection is no verdict")
    else:
        if verdict.comparison is not None:
            print(render_comparison(verdict.comparison.dump()))
        gate = verdict.gate
        if gate is not None:
            print(f"\nQuality gate: {gate.verdict}")
            for rule in gate.rules:
                print(one_line(f"  {'PASS' if rule.passed else 'FAIL'} {rule.name}: {rule.detail}"))
            for warning in gate.warnings:
                print(one_line(f"  warning: {warning}"))
    print(f"\ngoldeval decision: exit {verdict.code} — {one_line(verdict.reason)}")


def _finish(
    run: ResolvedRun,
    baseline: RunDocument | None,
    project: Project,
    no_gate: bool,
    as_json: bool,
) -> int:
    from goldeval.verdict.decide import decide_pair
    from goldeval.verdict.outcome import cut_short

    if not no_gate and project.dataset_dir is None:
        # Without the dataset's manifest the policy is unknown: gating with none would be a
        # silent NO_REGRESSION for any regressed run.
        raise _no_project(run.document, project)
    verdict = decide_pair(
        run.typed, baseline, dataset_dir=project.dataset_dir, gate_enabled=not no_gate
    )
    # The run's own record of how it ended (-x, a signal, a rerun plugin) is part of the one
    # verdict (RunOutcome.from_run reads it); the comparison and gate of a part of the
    # selection are not shown.
    cut = cut_short(run.typed, verdict.outcome)
    if cut is not None:
        verdict.comparison, verdict.gate = None, None
    policy_from = str(project.dataset_dir) if project.dataset_dir is not None else None
    if as_json:
        comparison, gate = verdict.comparison, verdict.gate
        print(
            json.dumps(
                {
                    "run": {
                        "status": run.typed.status,
                        "cutShort": cut.reason if cut is not None else None,
                    },
                    "comparison": comparison.dump() if comparison else None,
                    "qualityGate": gate.dump() if gate else None,
                    "exitDecision": {"code": verdict.code, "reason": verdict.reason},
                    "project": {
                        "root": str(project.root) if project.root else None,
                        "dataset": policy_from,
                    },
                },
                indent=2,
                ensure_ascii=False,
            )
        )
    else:
        _print_verdict(verdict, cut, policy_from)
    return verdict.code


def _run_places(args: argparse.Namespace) -> Any:
    """Where run references are looked up: ``--runs`` (else the project root's runs folder)
    and the store (as ``goldeval runs`` reads it)."""
    from goldeval.cli.runs import RunPlaces

    runs = getattr(args, "runs", None)
    runs_dir = Path(runs) if runs else project_root(getattr(args, "root", None)) / DEFAULT_RUNS
    return RunPlaces(runs_dir, store_location(args))


def cmd_compare(args: argparse.Namespace) -> int:
    from goldeval.cli.runs import resolve_run

    places = _run_places(args)
    baseline = resolve_run(args.baseline, places)
    candidate = resolve_run(args.candidate, places)
    project = find_project(candidate.document, args, candidate.anchor, baseline.anchor)
    return _finish(candidate, baseline.typed, project, args.no_gate, args.json)


def _default_baseline(
    run: RunDocument, args: argparse.Namespace, project: Project
) -> RunDocument | None:
    """The baseline of the default lookup (as pytest's): the first comparable file of the
    run's dataset and mode under ``--baselines`` or the project's baselines/, else None."""
    from goldeval.verdict.baseline import default_candidates, first_comparable
    from goldeval.verdict.decide import run_dataset_id

    if args.baselines:
        baselines_dir: Path | None = Path(args.baselines)
    elif project.root is not None:
        baselines_dir = project.root / "baselines"
    else:
        baselines_dir = None  # no project: refused in _finish unless --no-gate
    dataset_id = run_dataset_id(run)
    if baselines_dir is None or dataset_id is None:
        return None
    candidates = default_candidates(baselines_dir, dataset_id, _is_live(run))
    found = first_comparable(candidates, run)
    return found[1] if found is not None else None


def cmd_gate(args: argparse.Namespace) -> int:
    from goldeval.cli.runs import resolve_run, stored_run

    if args.run_key and args.run:
        raise GoldevalError("give a run or --run-key KEY, not both")
    places = _run_places(args)
    resolved = stored_run(args.run_key, places) if args.run_key else resolve_run(args.run, places)
    project = find_project(resolved.document, args, resolved.anchor)
    baseline: RunDocument | None
    if args.baseline:
        baseline = resolve_run(args.baseline, places).typed
    else:
        baseline = _default_baseline(resolved.typed, args, project)
    return _finish(resolved, baseline, project, args.no_gate, args.json)


def cmd_show(args: argparse.Namespace) -> int:
    from goldeval.cli.runs import resolve_run
    from goldeval.reports.markdown import render

    text = render(resolve_run(args.run, _run_places(args)).document)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return exit_codes.OK


def cmd_calibrate(args: argparse.Namespace) -> int:
    from goldeval.dataset.rows import resolve_dataset
    from goldeval.judge.calibration import calibrate, judge_calibration, load_calibration
    from goldeval.verdict.calibration import calibration_exit

    root = project_root(args.root)
    # As in pytest: an explicit --golden-root is relative to the working directory, the default
    # golden/ and .goldeval/ are the project's.
    golden_root = Path(args.golden_root) if args.golden_root else root / "golden"
    folder = resolve_dataset(args.golden, golden_root, Path.cwd())
    path = folder / "calibration.jsonl"
    if not (path.exists() or path.is_symlink()):
        raise GoldevalError("no calibration.jsonl in the dataset folder", path=folder)
    from goldeval.core.safe_files import contained_file

    # A link out of the dataset folder or a FIFO is refused before anything is opened.
    rows = load_calibration(contained_file(path, folder, what="calibration corpus"))
    policy = _calibration_policy(folder)
    if args.live:
        predict = _live_judge(args, folder)
        report = calibrate(rows, predict, live=True)
    else:
        report = calibrate(rows)
    verdict = judge_calibration(report, policy)
    decision = calibration_exit(verdict)
    out = (Path(args.out) if args.out else root / ".goldeval") / "calibration"
    out.mkdir(parents=True, exist_ok=True)
    document = {**report.to_json(), "verdict": verdict.to_json()}
    document["exitDecision"] = {"code": decision.code, "reason": decision.reason}
    (out / "report.json").write_text(
        json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    markdown = report.to_markdown() + verdict.to_markdown()
    (out / "report.md").write_text(markdown, encoding="utf-8")
    print(markdown)
    print(f"written to {out}")
    if decision.code == exit_codes.GATE_FAILED:
        for d in report.disagreements:
            line = f"disagreement {d.row_id} ({d.case_id}): human {d.human.value}, judge "
            print("  " + one_line(line + d.predicted.value))
    print(f"goldeval decision: exit {decision.code} — {one_line(decision.reason)}")
    return decision.code


def _calibration_policy(folder: Path) -> Any:
    """The dataset manifest's ``calibration:`` bar (None: the documented defaults)."""
    from goldeval.dataset.manifest import find_manifest, read_manifest

    manifest_path = find_manifest(folder)
    return read_manifest(manifest_path).calibration if manifest_path is not None else None


def _dataset_cases(folder: Path, root: str | None = None) -> list[Any]:
    """The dataset's rows, read by the same loader pytest uses (built-in graders' keys)."""
    from goldeval.dataset.rows import load_dataset
    from goldeval.graders.contract import ContractGrader
    from goldeval.graders.registry import builtin_graders

    graders = [ContractGrader(), *builtin_graders()]
    dataset = load_dataset(
        folder, project_root=project_root(root), graders=graders, require_fixtures=False
    )
    return dataset.cases


def _live_judge(args: argparse.Namespace, folder: Path) -> Any:
    from goldeval.core.safe_files import read_regular_file
    from goldeval.core.settings import provider_from_env
    from goldeval.dataset.case import GoldenCase
    from goldeval.judge.parse import build_judge_messages, parse_judge_output
    from goldeval.judge.runner import DEFAULT_RUBRIC
    from goldeval.providers.base import ProviderRequest
    from goldeval.providers.http import make_http_provider

    settings = provider_from_env(args.provider, args.judge_model, args.base_url)
    provider = make_http_provider(settings)
    rubric_path = folder / "rubric.md"
    rubric = (
        read_regular_file(rubric_path).decode("utf-8") if rubric_path.is_file() else DEFAULT_RUBRIC
    )
    cases = {c.id: c for c in _dataset_cases(folder, args.root)}

    def predict(row: Any) -> Any:
        case = cases.get(row.case_id) or GoldenCase(row.case_id, "", {})
        candidate = row.candidate
        if candidate is None:
            fixture = folder / "fixtures" / f"{row.case_id}.out.md"
            candidate = (
                read_regular_file(fixture, limit="fixture_bytes").decode("utf-8", "replace")
                if fixture.is_file()
                else ""
            )
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
    from goldeval.reports import site

    runs = Path(args.runs) if args.runs else project_root(args.root) / DEFAULT_RUNS
    if not runs.is_dir():
        # Nothing to render is a usage mistake (outside a project, a wrong --runs), not a
        # failed gate.
        raise GoldevalError(
            "no runs folder", path=runs, hint="run pytest --golden=ID first, or pass --runs DIR"
        )
    return int(site.main_site(["--out", args.out, "--runs", str(runs)]))


def cmd_store(args: argparse.Namespace) -> int:
    from goldeval.cli import store as store_cli

    args.store = store_location(args)
    return int(store_cli.run(args))


def cmd_prune(args: argparse.Namespace) -> int:
    root = project_root(args.root)
    policy = prune.Policy(keep_last=args.keep_last, older_than=args.older_than)
    url = None if (args.store or "").lower() in ("none", "off") else store_location(args)
    outcome = prune.prune(
        runs_dir=Path(args.runs) if args.runs else root / DEFAULT_RUNS,
        baselines_dir=Path(args.baselines) if args.baselines else root / "baselines",
        store_url=url,
        policy=policy,
        dry_run=args.dry_run,
    )
    if args.json:
        print(json.dumps(prune.summary_of(outcome), indent=2, ensure_ascii=False))
    else:
        for line in outcome.lines():
            print(safe_text(line))
    return exit_codes.OK


def cmd_verify(args: argparse.Namespace) -> int:
    from goldeval.results.evidence import verify_run_dir

    problems = verify_run_dir(Path(args.run_dir))
    for p in problems:
        print(one_line(p))
    if problems:
        print(f"goldeval verify: {len(problems)} problem(s)")
        return exit_codes.COMPARISON_INVALID
    print("goldeval verify: every artifact present and unchanged")
    return exit_codes.OK


def cmd_init(args: argparse.Namespace) -> int:
    from goldeval.cli.scaffold import init_dataset

    scaffold = init_dataset(args.name, Path.cwd())
    print(f"goldeval init: dataset {scaffold.dataset_id} in {scaffold.root}")
    for path in scaffold.created:
        print(f"  created {path}")
    for path in scaffold.kept:
        print(f"  kept    {path}")
    print("next:")
    for step, command in enumerate(scaffold.next_steps(), start=1):
        print(f"  {step}. {command}")
    return exit_codes.OK


def cmd_import(args: argparse.Namespace) -> int:
    from goldeval.cli.importers import import_dataset
    from goldeval.cli.scaffold import find_project_root

    cwd = Path.cwd()
    if args.golden_root:
        golden_root = Path(args.golden_root)
    else:
        golden_root = (find_project_root(cwd) or cwd) / "golden"
    report = import_dataset(
        Path(args.source), args.name, golden_root, fmt=args.format, split=args.split,
        strict_ids=args.strict_ids,
    )
    for line in report.lines():
        print(line)
    print(f"next: pytest --golden={args.name}-v1")
    return 0


def _server_main() -> Any:
    """goldeval.server.main, imported only when asked for: the server is an optional extra
    (``pip install -e '.[server]'``) and every other command must work without it."""
    try:
        from goldeval.server import main as server_main
    except ImportError as exc:
        raise GoldevalError(
            f"the evaluation service needs the [server] extra ({exc.name or exc} is missing)",
            hint="pip install 'pytest-goldeval[server]'",
        ) from None
    return server_main


def cmd_serve(args: argparse.Namespace) -> int:
    server_main = _server_main()
    root = str(project_root(args.root))
    return int(server_main.serve(args, store_location(args), root))


def cmd_worker(args: argparse.Namespace) -> int:
    server_main = _server_main()
    root = str(project_root(args.root))
    return int(server_main.worker(args, store_location(args), root))


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0")
    return value


def _service_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        default=None,
        help="SQLite path or postgresql:// URL (default GOLDEVAL_STORE, else "
        "<project root>/.goldeval/goldeval.sqlite3)",
    )
    p.add_argument(
        "--datasets", default=None, metavar="DIR", help="golden root (default <root>/golden)"
    )
    p.add_argument(
        "--runs", default=None, metavar="DIR", help="run folders (default <root>/.goldeval/runs)"
    )
    p.add_argument(
        "--root",
        default=None,
        metavar="DIR",
        help="project root pytest runs in (default: as for the other commands)",
    )
    p.add_argument(
        "--lease",
        type=_positive,
        default=30.0,
        metavar="SECONDS",
        help="a RUNNING run whose worker has not renewed its claim for this long is taken "
        "over by another worker (default 30)",
    )


def build_parser() -> argparse.ArgumentParser:
    from goldeval import __version__

    parser = _Parser(
        prog="goldeval", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"goldeval {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def root_option(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--root",
            default=None,
            metavar="DIR",
            help="project root (default: the nearest folder at or above the working directory "
            "with a pytest configuration file, else the working directory)",
        )

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--root",
            default=None,
            metavar="DIR",
            help="project folder holding golden/ and baselines/ (default: the projectRoot "
            "recorded in the run, else the folders above the run file, else the working "
            "directory; the one that has the run's dataset)",
        )
        p.add_argument(
            "--golden-root",
            default=None,
            metavar="DIR",
            help="datasets folder with the gate policy (default: <project>/golden)",
        )
        p.add_argument("--no-gate", action="store_true", help="report without gating")
        p.add_argument("--json", action="store_true", help="print the decision as JSON")

    def run_places(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--runs",
            default=None,
            metavar="DIR",
            help="runs folder run ids and LATEST are looked up in (default: <project "
            "root>/.goldeval/runs)",
        )
        p.add_argument(
            "--store",
            default=None,
            help="SQLite path or postgresql:// URL run ids and keys are looked up in (default "
            "GOLDEVAL_STORE, else <project root>/.goldeval/goldeval.sqlite3)",
        )

    p = sub.add_parser("compare", help="compare two saved runs (run.json or baselines)")
    p.add_argument("baseline", help=RUN_HELP)
    p.add_argument("candidate", help=RUN_HELP)
    run_places(p)
    common(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("gate", help="gate a saved run, or a whole run key from the store")
    p.add_argument("run", nargs="?", default=None, help=RUN_HELP + " (default: the latest run)")
    p.add_argument("--run-key", default=None, help="gate every attempt stored under this key")
    run_places(p)
    p.add_argument("--baseline", default=None)
    p.add_argument(
        "--baselines",
        default=None,
        help="folder of the default lookup (default: <project>/baselines)",
    )
    common(p)
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser("calibrate", help="judge calibration over calibration.jsonl")
    p.add_argument("--golden", required=True, metavar="ID")
    root_option(p)
    p.add_argument(
        "--golden-root", default=None, help="datasets folder (default: <project root>/golden)"
    )
    p.add_argument("--out", default=None, help="folder (default: <project root>/.goldeval)")
    p.add_argument("--live", action="store_true", help="re-judge with a live judge model")
    p.add_argument("--provider", default="ollama")
    p.add_argument("--judge-model", default=None)
    p.add_argument("--base-url", default=None)
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser("site", help="render the runs into a static site")
    p.add_argument("--out", required=True)
    p.add_argument(
        "--runs", default=None, help="runs folder (default: <project root>/.goldeval/runs)"
    )
    root_option(p)
    p.set_defaults(func=cmd_site)

    p = sub.add_parser("show", help="show one saved run's report")
    p.add_argument("run", nargs="?", default=None, help=RUN_HELP + " (default: the latest run)")
    run_places(p)
    root_option(p)
    p.set_defaults(func=cmd_show)

    for name, helptext in (
        ("runs", "list runs in the store"),
        ("export", "write a run's run.json from the store"),
    ):
        p = sub.add_parser(name, help=helptext)
        if name != "runs":
            p.add_argument("run", help="run id or run key")
        p.add_argument(
            "--store",
            default=None,
            help="SQLite path or postgresql:// URL (default GOLDEVAL_STORE, else "
            "<project root>/.goldeval/goldeval.sqlite3)",
        )
        root_option(p)
        if name == "export":
            p.add_argument("--out", default=None, help="file (default: stdout)")
        p.set_defaults(func=cmd_store)

    p = sub.add_parser(
        "prune",
        help="delete old run folders and store runs (never LATEST's, a baseline's, or one "
        "in progress)",
    )
    keep = p.add_mutually_exclusive_group(required=True)
    keep.add_argument("--keep-last", type=int, default=None, metavar="N", help="keep N newest")
    keep.add_argument(
        "--older-than", type=float, default=None, metavar="DAYS", help="delete runs older"
    )
    p.add_argument("--dry-run", action="store_true", help="only list what would be deleted")
    p.add_argument(
        "--store",
        default=None,
        help="SQLite path or postgresql:// URL, or none (default GOLDEVAL_STORE, else "
        "<project root>/.goldeval/goldeval.sqlite3)",
    )
    p.add_argument(
        "--runs", default=None, help="runs folder (default: <project root>/.goldeval/runs)"
    )
    p.add_argument(
        "--baselines", default=None, help="baselines folder (default: <project root>/baselines)"
    )
    p.add_argument("--json", action="store_true", help="print what was done as JSON")
    root_option(p)
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("verify", help="check a run folder's artifacts against manifest.json")
    p.add_argument("run_dir")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("serve", help="the evaluation service: REST API, run page and workers")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="in-process workers (runs at once; 0: API only, use `goldeval worker`)",
    )
    p.add_argument("--max-body", type=int, default=64 * 1024, metavar="BYTES")
    p.add_argument(
        "--header-timeout",
        type=float,
        default=limits.default("service_header_seconds"),
        metavar="SECONDS",
        help="a request's headers must arrive within this many seconds of the connection "
        "opening or the previous response (408 and closed otherwise; default 10)",
    )
    p.add_argument("--max-cases", type=int, default=None, metavar="N", help="cases per run")
    p.add_argument("--max-attempts", type=int, default=20, metavar="N")
    p.add_argument(
        "--rate-limit", type=int, default=None, metavar="N", help="requests a minute per key"
    )
    p.add_argument("--no-live", action="store_true", help="refuse live runs")
    _service_options(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("worker", help="run queued service runs (no API)")
    p.add_argument("--workers", type=int, default=1, metavar="N", help="runs at once")
    _service_options(p)
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser(
        "import",
        help="a CSV, Hugging Face folder, promptfoo tests or DeepEval goldens as a dataset",
    )
    p.add_argument("source", help="file or folder to import")
    p.add_argument("--name", required=True, help="dataset folder name (golden/NAME, id NAME-v1)")
    p.add_argument(
        "--format",
        choices=("csv", "hf", "promptfoo", "deepeval"),
        default=None,
        help="source format (default: from the name: .csv, a folder or .jsonl, .yaml, .json)",
    )
    p.add_argument("--split", default=None, help="Hugging Face: one split of a DatasetDict")
    p.add_argument(
        "--strict-ids", action="store_true", help="refuse the import if any id must be renamed"
    )
    p.add_argument(
        "--golden-root", default=None, help="datasets folder (default: <project root>/golden)"
    )
    p.set_defaults(func=cmd_import)

    p = sub.add_parser("init", help="scaffold a dataset under golden/ (generic, no pack)")
    p.add_argument("name", nargs="?", default="my-dataset", help="dataset folder name")
    p.set_defaults(func=cmd_init)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except GoldevalError as exc:
        print(f"goldeval: {safe_text(exc)}", file=sys.stderr)
        return exit_codes.code_for_error(exc)
    except KeyboardInterrupt:
        return exit_codes.INTERRUPTED
    except BrokenPipeError:  # `goldeval show RUN | head`
        sys.stderr.close()
        return exit_codes.OK


if __name__ == "__main__":
    raise SystemExit(main())

"""``goldeval compare``, ``gate`` and ``show``: the one verdict over saved runs, and a saved
run's report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from goldeval.cli.project import (
    DEFAULT_RUNS,
    Project,
    find_project,
    load_builtin_dataset,
    project_root,
    store_location,
)
from goldeval.cli.runs import ResolvedRun, RunPlaces, resolve_run, stored_run
from goldeval.core.errors import GoldevalError
from goldeval.core.textsafe import one_line
from goldeval.reports.markdown import render, render_comparison
from goldeval.results.documents import Comparison, RunDocument
from goldeval.verdict import exit_codes
from goldeval.verdict.baseline import default_candidates, first_comparable, refuse_out_of_project
from goldeval.verdict.comparison import run_mode
from goldeval.verdict.decide import decide_pair, run_dataset_id
from goldeval.verdict.outcome import cut_short


def _is_live(run: RunDocument) -> bool:
    return run_mode(run) == "LIVE"


def _no_project(run: RunDocument, project: Project) -> GoldevalError:
    dataset = run_dataset_id(run)
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
    if policy_from is not None:
        print(f"dataset and gate policy: {policy_from}")
    if cut is not None:
        print(f"run {cut.status}: {one_line(cut.reason)}")
        print("not compared or gated: a run that did not grade its selection is no verdict")
    else:
        if verdict.comparison is not None:
            print(render_comparison(Comparison.model_validate(verdict.comparison.dump())))
        gate = verdict.gate
        if gate is not None:
            print(f"\nQuality gate: {gate.verdict}")
            for rule in gate.rules:
                print(one_line(f"  {'PASS' if rule.passed else 'FAIL'} {rule.name}: {rule.detail}"))
            for warning in gate.warnings:
                print(one_line(f"  warning: {warning}"))
    print(f"\ngoldeval decision: exit {verdict.code} — {one_line(verdict.reason)}")


def _same_rows(run: RunDocument, project: Project) -> None:
    """Refuse to gate ``run`` with the policy of a dataset of the same id but other rows (a
    run folder copied into another project, or rows changed without a version bump): its
    gate passed a run whose own decision was a failure. Not checked (a warning) when the
    rows do not load with the built-in graders alone (a project's own graders)."""
    recorded = (run.protocol.dataset_hash if run.protocol else None) or run.dataset_hash
    if not recorded or project.dataset_dir is None or project.root is None:
        return
    try:
        found = load_builtin_dataset(project.dataset_dir, project.root).hash
    except GoldevalError as exc:
        print(f"warning: the dataset's rows were not compared with the run's: {one_line(str(exc))}")
        return
    if found != recorded:
        raise GoldevalError(
            f"the run was made on other rows of dataset {run_dataset_id(run)!r} than "
            f"{project.dataset_dir} holds (datasetHash {recorded[:12]}… vs {found[:12]}…): "
            "that folder's gate policy is another dataset's",
            hint="gate the run where its rows are (--root), bump the dataset's version when "
            "rows change, or --no-gate to report without gating",
        )


def _finish(
    run: ResolvedRun,
    baseline: RunDocument | None,
    project: Project,
    no_gate: bool,
    as_json: bool,
    *,
    comparison_asked: bool = False,
) -> int:
    if not no_gate and project.dataset_dir is None:
        # Without the dataset's manifest the policy is unknown: gating with none would be a
        # silent NO_REGRESSION for any regressed run.
        raise _no_project(run.typed, project)
    if not no_gate:
        _same_rows(run.typed, project)
    verdict = decide_pair(
        run.typed,
        baseline,
        dataset_dir=project.dataset_dir,
        gate_enabled=not no_gate,
        comparison_asked=comparison_asked,
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
    runs = getattr(args, "runs", None)
    runs_dir = Path(runs) if runs else project_root(getattr(args, "root", None)) / DEFAULT_RUNS
    return RunPlaces(runs_dir, store_location(args))


def cmd_compare(args: argparse.Namespace) -> int:
    places = _run_places(args)
    baseline = resolve_run(args.baseline, places)
    candidate = resolve_run(args.candidate, places)
    project = find_project(candidate.typed, args, candidate.anchor, baseline.anchor)
    return _finish(
        candidate, baseline.typed, project, args.no_gate, args.json, comparison_asked=True
    )


def _default_baseline(
    run: RunDocument, args: argparse.Namespace, project: Project
) -> RunDocument | None:
    """The baseline of the default lookup (as pytest's): the first comparable file of the
    run's dataset and mode under ``--baselines`` or the project's baselines/, else None."""
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


def _recorded_baseline(run: RunDocument, project: Project, places: RunPlaces) -> RunDocument | None:
    """The baseline ``run`` was compared with when it ran; None when it was compared with
    none. Gated again without it, a run decided GATE FAIL on a delta rule would pass on its
    thresholds alone: found by the recorded path (relative to the project) or the
    baseline's run id (a service run's stored baseline), else refused."""
    if run.comparison is None:
        return None
    tried: list[str] = []
    if run.baseline_path:
        path = Path(run.baseline_path)
        if not path.is_absolute() and project.root is not None:
            path = project.root / path
            # Recorded inside the project: read as the default lookup reads it, never through
            # a link out (pytest refused that baseline with 65, the gate passed on it).
            refuse_out_of_project(path, project.root)
        tried.append(str(path))
        if path.is_file():
            return resolve_run(str(path), places).typed
    reference = run.comparison.baseline_run_id
    if reference:
        tried.append(reference)
        try:
            return resolve_run(reference, places).typed
        except GoldevalError:
            pass
    raise GoldevalError(
        "the run was compared with a baseline when it ran ("
        + (", ".join(tried) or "not named")
        + "), and that baseline is not found here: gating without it would drop the rules "
        "that compare with it",
        hint="pass --baseline FILE_OR_RUN (the baseline it was compared with), or --no-gate "
        "to report without gating",
    )


def cmd_gate(args: argparse.Namespace) -> int:
    if args.run_key and args.run:
        raise GoldevalError("give a run or --run-key KEY, not both")
    places = _run_places(args)
    resolved = stored_run(args.run_key, places) if args.run_key else resolve_run(args.run, places)
    project = find_project(resolved.typed, args, resolved.anchor)
    baseline: RunDocument | None
    if args.baseline:
        baseline = resolve_run(args.baseline, places).typed
    elif not args.no_gate and resolved.typed.comparison is not None and project.dataset_dir:
        # (No project: _finish refuses first, naming where it looked.)
        baseline = _recorded_baseline(resolved.typed, project, places)
    else:
        baseline = _default_baseline(resolved.typed, args, project)
    return _finish(resolved, baseline, project, args.no_gate, args.json)


def cmd_show(args: argparse.Namespace) -> int:
    text = render(resolve_run(args.run, _run_places(args)).typed)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return exit_codes.OK

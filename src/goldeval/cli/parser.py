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
import importlib
import sys

from goldeval import __version__
from goldeval.core import limits
from goldeval.core.deadline import positive_seconds
from goldeval.verdict import exit_codes

#: What a RUN argument may be (goldeval.cli.runs.resolve_run).
RUN_HELP = (
    "a run.json or baseline file, a run folder, the LATEST pointer, a run id (folder name or "
    "store id) or a run key"
)

_STORE_HELP = (
    "SQLite path or postgresql:// URL (default GOLDEVAL_STORE, else "
    "<project root>/.goldeval/goldeval.sqlite3)"
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"goldeval: error: {message}", file=sys.stderr)
        raise SystemExit(exit_codes.USAGE)


class _Command:
    """A subcommand's function, imported when the command runs: ``goldeval --version`` and
    ``--help`` import no command module (and so none of the packages they need)."""

    def __init__(self, module: str, function: str) -> None:
        self.module, self.function = module, function

    def __call__(self, args: argparse.Namespace) -> int:
        module = importlib.import_module(f"goldeval.cli.{self.module}")
        return int(getattr(module, self.function)(args))


def _root_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--root",
        default=None,
        metavar="DIR",
        help="project root (default: the nearest folder at or above the working directory "
        "with a pytest configuration file, else the working directory)",
    )


def _gate_options(p: argparse.ArgumentParser) -> None:
    """The project a saved run is gated in, and how the decision is printed."""
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


def _run_places(p: argparse.ArgumentParser) -> None:
    """Where run ids, keys and LATEST are looked up."""
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


def _saved_run_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("compare", help="compare two saved runs (run.json or baselines)")
    p.add_argument("baseline", help=RUN_HELP)
    p.add_argument("candidate", help=RUN_HELP)
    _run_places(p)
    _gate_options(p)
    p.set_defaults(func=_Command("saved_runs", "cmd_compare"))

    p = sub.add_parser("gate", help="gate a saved run, or a whole run key from the store")
    p.add_argument("run", nargs="?", default=None, help=RUN_HELP + " (default: the latest run)")
    p.add_argument("--run-key", default=None, help="gate every attempt stored under this key")
    _run_places(p)
    p.add_argument("--baseline", default=None)
    p.add_argument(
        "--baselines",
        default=None,
        help="folder of the default lookup (default: <project>/baselines)",
    )
    _gate_options(p)
    p.set_defaults(func=_Command("saved_runs", "cmd_gate"))


def _calibrate_command(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("calibrate", help="judge calibration over calibration.jsonl")
    p.add_argument("--golden", required=True, metavar="ID")
    _root_option(p)
    p.add_argument(
        "--golden-root", default=None, help="datasets folder (default: <project root>/golden)"
    )
    p.add_argument("--out", default=None, help="folder (default: <project root>/.goldeval)")
    p.add_argument("--live", action="store_true", help="re-judge with a live judge model")
    p.add_argument("--provider", default="ollama")
    p.add_argument("--judge-model", default=None)
    p.add_argument("--base-url", default=None)
    p.set_defaults(func=_Command("calibrate", "cmd_calibrate"))


def _report_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("site", help="render the runs into a static site")
    p.add_argument("--out", required=True)
    p.add_argument(
        "--runs", default=None, help="runs folder (default: <project root>/.goldeval/runs)"
    )
    _root_option(p)
    p.set_defaults(func=_Command("commands", "cmd_site"))

    p = sub.add_parser("show", help="show one saved run's report")
    p.add_argument("run", nargs="?", default=None, help=RUN_HELP + " (default: the latest run)")
    _run_places(p)
    _root_option(p)
    p.set_defaults(func=_Command("saved_runs", "cmd_show"))


def _store_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    for name, helptext in (
        ("runs", "list runs in the store"),
        ("export", "write a run's run.json from the store"),
    ):
        p = sub.add_parser(name, help=helptext)
        if name != "runs":
            p.add_argument("run", help="run id or run key")
        p.add_argument("--store", default=None, help=_STORE_HELP)
        _root_option(p)
        if name == "export":
            p.add_argument("--out", default=None, help="file (default: stdout)")
        p.set_defaults(func=_Command("commands", "cmd_store"))

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
    _root_option(p)
    p.set_defaults(func=_Command("commands", "cmd_prune"))

    p = sub.add_parser("verify", help="check a run folder's artifacts against manifest.json")
    p.add_argument("run_dir")
    p.set_defaults(func=_Command("commands", "cmd_verify"))


def _positive(text: str) -> float:
    try:
        return positive_seconds(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _service_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=None, help=_STORE_HELP)
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


def _service_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
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
        type=_positive,
        default=limits.default("service_header_seconds"),
        metavar="SECONDS",
        help="a request's headers must arrive within this many seconds of the connection "
        "opening or the previous response (408 and closed otherwise; default 10)",
    )
    p.add_argument(
        "--body-timeout",
        type=_positive,
        default=limits.default("service_body_seconds"),
        metavar="SECONDS",
        help="a request's body must arrive within this many seconds of its headers (408 and "
        "closed otherwise; default 30)",
    )
    p.add_argument("--max-cases", type=int, default=None, metavar="N", help="cases per run")
    p.add_argument("--max-attempts", type=int, default=20, metavar="N")
    p.add_argument(
        "--rate-limit", type=int, default=None, metavar="N", help="requests a minute per key"
    )
    p.add_argument("--no-live", action="store_true", help="refuse live runs")
    _service_options(p)
    p.set_defaults(func=_Command("commands", "cmd_serve"))

    p = sub.add_parser("worker", help="run queued service runs (no API)")
    p.add_argument("--workers", type=int, default=1, metavar="N", help="runs at once")
    _service_options(p)
    p.set_defaults(func=_Command("commands", "cmd_worker"))


def _dataset_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
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
    p.set_defaults(func=_Command("commands", "cmd_import"))

    p = sub.add_parser("init", help="scaffold a dataset under golden/ (generic, no pack)")
    p.add_argument("name", nargs="?", default="my-dataset", help="dataset folder name")
    p.set_defaults(func=_Command("commands", "cmd_init"))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="goldeval", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"goldeval {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    # In the order of `goldeval --help`.
    _saved_run_commands(sub)
    _calibrate_command(sub)
    _report_commands(sub)
    _store_commands(sub)
    _service_commands(sub)
    _dataset_commands(sub)
    return parser

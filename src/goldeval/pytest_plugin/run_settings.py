"""The run's settings from pytest's options and ini keys, refused early when they cannot work.

Every bad option is a ``pytest.UsageError`` (exit 4) before any model call: a missing model, an
unpriced ``--golden-max-cost``, a rerun plugin that would hide failed tries.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from goldeval.core import limits
from goldeval.core.errors import RERUN_HINT, GoldevalError
from goldeval.core.models import Mode
from goldeval.core.settings import (
    ProviderSettings,
    RunSettings,
    check_credential,
    provider_from_env,
)
from goldeval.providers.budget import Budget, parse_prices
from goldeval.pytest_plugin.variant_baselines import variant_path

if TYPE_CHECKING:
    from goldeval.pytest_plugin.variants import SessionVariants


def refuse_unfit_options(config: pytest.Config) -> None:
    """pytest options and plugins a golden session cannot honestly run with (usage errors)."""
    refuse_rerun_plugins(config)
    refuse_setup_only(config)


def refuse_setup_only(config: pytest.Config) -> None:
    """``--setup-only`` and ``--setup-plan`` are refused with ``--golden`` (usage error).

    They set the golden items up without grading them: ``--setup-only`` even asks the model
    for every answer (the item's setup obtains it) and throws it away, and pytest then reports
    every item as passed, in the terminal and in the JUnit XML a dashboard reads, with exit 0:
    green for a run that graded nothing.
    """
    option = config.option
    # --setup-plan sets setuponly too: name the one given.
    used = "--setup-plan" if getattr(option, "setupplan", False) else "--setup-only"
    if getattr(option, "setuponly", False) or getattr(option, "setupplan", False):
        asked = " (--setup-only asks the model for every answer and throws it away)"
        raise pytest.UsageError(
            f"--golden cannot be combined with {used}: it sets the golden items up without "
            f"grading them{asked if used == '--setup-only' else ''} and reports them passed; "
            "list the items with --collect-only, or the fixtures with --fixtures-per-test"
        )


def refuse_rerun_plugins(config: pytest.Config) -> None:
    """Rerun and repeat plugins are refused with ``--golden`` (usage error, exit 4).

    pytest-rerunfailures hides the failed tries of an attempt (only the last one counts) and
    pytest-repeat runs every attempt N times under one key (only the last one is kept): both
    would report a pass rate the model never had. ``--golden-attempts`` is the honest way to
    try an attempt several times. Other rerun plugins (flaky, a marker) are caught per item:
    see :class:`goldeval.pipeline.orchestration.AttemptRunner` and
    ``Controller.pytest_runtest_logreport``.
    """
    problems = []
    pm = config.pluginmanager
    if pm.hasplugin("rerunfailures"):
        reruns: list[Any] = [
            config.getoption("reruns", default=None),
            config.getoption("force_reruns", default=None),
        ]
        try:
            reruns.append(config.getini("reruns"))
        except ValueError:  # an older version without the ini option
            pass
        if any(_positive(v) for v in reruns):
            problems.append("pytest-rerunfailures (--reruns) hides failed tries")
    if pm.hasplugin("repeat") and _positive(config.getoption("count", default=None), above=1):
        problems.append("pytest-repeat (--count) runs each attempt again under the same key")
    if pm.hasplugin("flaky") and config.getoption("force_flaky", default=False):
        problems.append("flaky (--force-flaky) hides failed tries")
    if problems:
        raise pytest.UsageError(
            f"--golden cannot be combined with {' and '.join(problems)}: {RERUN_HINT}; "
            "drop the option (or -p no:rerunfailures / -p no:repeat)"
        )


def _positive(value: Any, above: int = 0) -> bool:
    try:
        return value is not None and value != "" and int(value) > above
    except (TypeError, ValueError):
        return False


def _opt(config: pytest.Config, name: str, default: Any = None) -> Any:
    value = config.getoption(name, default=None)
    return default if value is None else value


def settings_from_config(
    config: pytest.Config, variants: SessionVariants | None = None
) -> RunSettings:
    """The run's settings; with the manifest's selected ``variants``
    (goldeval.pytest_plugin.variants), the models they name take the place of
    ``--golden-models`` and their names are the session's runs."""
    variant_models = variants.models if variants is not None else None
    mode = Mode(_opt(config, "golden_mode", "fixture"))
    attempts, adaptive = _attempts_setting(config, variants)
    provider_name = str(_opt(config, "golden_provider", "ollama")).lower()
    models_opt = _opt(config, "golden_models")
    models = [m.strip() for m in models_opt.split(",") if m.strip()] if models_opt else []
    if variant_models:
        models = list(variant_models)
    model = _opt(config, "golden_model") or (models[0] if models else None)
    if model is None and mode is not Mode.FIXTURE and provider_name in ("ollama", "openai"):
        if provider_name == "openai":
            # Every call would fail the same way: a usage error now, not an ERROR per attempt.
            raise pytest.UsageError(
                "--golden-provider=openai needs a model: pass --golden-model=NAME "
                "(or --golden-models=A,B); OpenAI-compatible servers have no default model"
            )
        model = "qwen2.5-coder:7b"
    try:
        provider = provider_from_env(provider_name, model, _opt(config, "golden_base_url"))
    except GoldevalError as exc:
        raise pytest.UsageError(str(exc)) from None
    timeout = _opt(config, "golden_timeout")
    if timeout is not None:
        provider.read_timeout = float(timeout)
    provider.retries = int(_opt(config, "golden_retries", provider.retries))
    provider.call_timeout = _opt(config, "golden_call_timeout")
    provider.max_response_bytes = _max_response_bytes(config)
    provider.max_concurrency = int(_opt(config, "golden_concurrency", 8))
    provider.adaptive = _opt(config, "golden_concurrency_mode", "adaptive") == "adaptive"
    provider.rpm = _opt(config, "golden_rpm")
    provider.tpm = _opt(config, "golden_tpm")
    provider.stream = bool(_opt(config, "golden_stream", False))
    try:
        provider.prices = parse_prices(config.getini("golden_prices") or [])
    except GoldevalError as exc:
        raise pytest.UsageError(str(exc)) from None
    max_cost = _opt(config, "golden_max_cost")
    if max_cost is not None and mode is not Mode.FIXTURE:
        _refuse_unpriced(provider, models)
    out = _out_dir(config)
    artifacts = str(_opt(config, "golden_artifacts", "failure"))
    deadline = _opt(config, "golden_deadline")
    return RunSettings(
        dataset=config.getoption("golden"),
        mode=mode,
        attempts=attempts,
        adaptive=adaptive,
        out_dir=out,
        artifacts=artifacts,
        provider=provider,
        models=models,
        variants=tuple(variants.names) if variants is not None else (),
        concurrency=int(_opt(config, "golden_concurrency", 8)),
        deadline=float(deadline) if deadline is not None else None,
        baseline=_opt(config, "golden_baseline"),
        save_baseline=_opt(config, "golden_save_baseline"),
        force_save_baseline=bool(_opt(config, "golden_force_save_baseline", False)),
        gate=not bool(_opt(config, "golden_no_gate", False)),
        judge=bool(_opt(config, "golden_judge", False)) and mode is not Mode.FIXTURE,
        judge_model=_opt(config, "golden_judge_model"),
        judge_repetitions=int(_opt(config, "golden_judge_repetitions", 1)),
        judge_max_tokens=_judge_max_tokens(config),
        overwrite_fixtures=bool(_opt(config, "golden_overwrite_fixtures", False)),
        cache_dir=_cache_dir(config),
        experiment=_opt(config, "golden_experiment"),
        junit_path=_opt(config, "golden_junit"),
        store=_opt(config, "golden_store") or os.environ.get("GOLDEVAL_STORE") or None,
        run_key=_opt(config, "golden_run_key"),
        rerun_errors=bool(_opt(config, "golden_rerun_errors", False)),
        max_cost=max_cost,
        max_tokens=_opt(config, "golden_max_tokens"),
    )


def _refuse_unpriced(provider: ProviderSettings, models: Sequence[str | None]) -> None:
    """``--golden-max-cost`` in a live run needs a price for every model it runs."""
    unpriced = [
        m
        for m in (models or [provider.model])
        if m not in provider.prices and provider.price_per_1k_input is None
    ]
    if unpriced:
        raise pytest.UsageError(
            f"--golden-max-cost needs a price for {', '.join(map(str, unpriced))}: add "
            "'MODEL = INPUT OUTPUT' (per 1k tokens) to the golden_prices ini key"
        )


def _out_dir(config: pytest.Config) -> Path:
    """A path typed on the command line is relative to where pytest was started (as
    --junitxml); the ini value and the default are the project's: relative to the rootdir,
    so pytest started in any subfolder writes the same .goldeval/ (docs: "Project root")."""
    return out_dir_of(config, _opt(config, "golden_out", None))


def out_dir_of(config: pytest.Config, typed: str | None) -> Path:
    """The runs folder for ``--golden-out`` as typed (None: the ini value, else the default);
    also before the options are parsed (pytest_plugin.session_begun)."""
    out = Path(typed or config.getini("golden_out") or ".goldeval/runs")
    if not out.is_absolute():
        out = (Path(config.invocation_params.dir) if typed else Path(config.rootpath)) / out
    return out


def _attempts_setting(config: pytest.Config, variants: SessionVariants | None) -> tuple[int, bool]:
    """``--golden-attempts``: (attempts per case, adaptive); ``auto:MAX`` is (MAX, True)."""
    raw = _opt(config, "golden_attempts", 1)
    adaptive = isinstance(raw, str) and raw.startswith("auto:")
    attempts = int(raw.removeprefix("auto:") if adaptive else raw)
    if attempts < 1:
        raise pytest.UsageError("--golden-attempts must be at least 1")
    most = int(limits.default("attempts_per_case"))
    if not adaptive and attempts > most:
        raise pytest.UsageError(
            f"--golden-attempts={attempts}: at most {most} (the attempts_per_case limit: each "
            "attempt is a test item of every case)"
        )
    if adaptive:
        check_adaptive(config, attempts, variants)
    return attempts, adaptive


def check_adaptive(config: pytest.Config, most: int, variants: SessionVariants | None) -> None:
    """``--golden-attempts=auto:MAX`` is refused (usage error, before any call) where its rule
    cannot work: no compared pair of variants selected (the rule asks the paired
    comparison), with an xdist ``--dist`` other than ``load`` (its rounds have their own
    scheduler, goldeval.pytest_plugin.rounds), with ``--golden-run-key`` (an earlier
    session's attempts would not count in its rounds), or past the ``auto_attempts`` limit."""
    limit = int(limits.default("auto_attempts"))
    if most > limit:
        raise pytest.UsageError(
            f"--golden-attempts=auto:{most}: at most auto:{limit} (the auto_attempts limit: "
            "each extra attempt is a model call for every unsettled case and variant)"
        )
    if variants is None or variants.compared() is None:
        raise pytest.UsageError(
            "--golden-attempts=auto:MAX decides between attempts from the paired comparison: "
            "it needs a dataset whose manifest has `variants:` and `gate.compare`, with both "
            "compared variants selected (docs/variants.md); use --golden-attempts=N otherwise"
        )
    dist = getattr(config.option, "dist", "no")
    if dist not in ("no", "load"):
        raise pytest.UsageError(
            f"--golden-attempts=auto:MAX under xdist sends each round's items once the round "
            f"before has ended (its own scheduler, built on --dist=load): leave out --dist={dist}"
        )
    remote = [spec for spec in getattr(config.option, "tx", None) or [] if "popen" not in spec]
    if dist != "no" and remote:
        raise pytest.UsageError(
            f"--golden-attempts=auto:MAX: the controller writes each round's plan to a folder on "
            f"this machine, which remote xdist workers (--tx {remote[0]}) cannot read; use "
            "local workers (-n N)"
        )
    if _opt(config, "golden_run_key"):
        raise pytest.UsageError(
            "--golden-attempts=auto:MAX cannot resume a run key: an earlier session's attempts "
            "would not count in its rounds"
        )


def refuse_existing_baseline(
    config: pytest.Config, settings: RunSettings, variants: SessionVariants | None = None
) -> None:
    """``--golden-save-baseline=PATH`` never overwrites a baseline silently (in a variant
    session, any variant's file: ``{variant}`` replaced by each selected name)."""
    save = settings.save_baseline
    if not save or settings.force_save_baseline:
        return
    names: list[str | None] = list(variants.names) if variants is not None else [None]
    for name in names:
        typed = variant_path(save, name)
        save_path = Path(typed)
        if not save_path.is_absolute():
            save_path = Path(config.invocation_params.dir) / save_path
        if save_path.exists():
            raise pytest.UsageError(
                f"{typed}: baseline already exists; pass --golden-force-save-baseline to "
                "overwrite it"
            )


def _max_response_bytes(config: pytest.Config) -> int:
    """``--golden-max-response-bytes``, else the ini key, else the limit's default."""
    typed = _opt(config, "golden_max_response_bytes")
    if typed is not None:
        return int(typed)
    raw = config.getini("golden_max_response_bytes")
    if raw in (None, ""):
        return int(limits.default("response_bytes"))
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if value < 1:
        raise pytest.UsageError(
            f"golden_max_response_bytes = {raw!r}: must be a whole number of bytes, at least 1"
        )
    return value


def _judge_max_tokens(config: pytest.Config) -> int:
    """``--golden-judge-max-tokens``, else the ini key, else the judge_max_tokens limit."""
    value = _opt(config, "golden_judge_max_tokens")
    if value is not None:
        return int(value)
    raw = str(config.getini("golden_judge_max_tokens") or "").strip()
    if not raw:
        return int(limits.default("judge_max_tokens"))
    try:
        number = int(raw)
    except ValueError:
        number = 0
    if number < 1:
        raise pytest.UsageError(
            f"golden_judge_max_tokens = {raw!r} in the ini file is not a whole number of 1 or "
            "more (max_tokens of every judge call)"
        )
    return number


def _cache_dir(config: pytest.Config) -> Path | None:
    value = _opt(config, "golden_cache")
    if not value:
        return None
    path = Path(value)
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


def process_budget(settings: RunSettings) -> Budget:
    """This process's share of ``--golden-max-cost`` / ``--golden-max-tokens``: each xdist
    worker spends its own, so each gets the budget divided by the number of workers."""
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1))
    max_cost = settings.max_cost / workers if settings.max_cost is not None else None
    max_tokens = max(1, settings.max_tokens // workers) if settings.max_tokens is not None else None
    return Budget(max_cost=max_cost, max_tokens=max_tokens)


def judge_provider_settings(config: pytest.Config, s: RunSettings) -> ProviderSettings:
    """The judge's provider settings: its own provider, base URL and credentials.

    ``--golden-judge-provider`` (default: the generation provider) and
    ``--golden-judge-base-url`` (default: ``--golden-base-url`` when the provider is the
    same, else that provider's environment: OLLAMA_HOST, OPENAI_BASE_URL). Credentials
    come from GOLDEVAL_JUDGE_API_KEY / GOLDEVAL_JUDGE_USER / GOLDEVAL_JUDGE_PASSWORD, else
    the provider's own variables (OPENAI_API_KEY, OLLAMA_USER, ...) or the URL's userinfo.
    A usage error (exit 4) names the judge option at fault.
    """
    name = str(_opt(config, "golden_judge_provider", s.provider.name)).strip().lower()
    same = name == s.provider.name
    model = s.judge_model or (s.provider.model if same else None)
    if model is None and name in ("ollama", "openai"):
        raise pytest.UsageError(
            f"--golden-judge-provider={name} differs from the generation provider: pass "
            "--golden-judge-model=NAME as well"
        )
    judge_url = _opt(config, "golden_judge_base_url")
    base_url = judge_url or (_opt(config, "golden_base_url") if same else None)
    option = "--golden-judge-base-url" if judge_url else "--golden-base-url"
    try:
        settings = provider_from_env(name, model, base_url, option=option)
    except GoldevalError as exc:
        raise pytest.UsageError(f"judge: {exc}") from None
    key = os.environ.get("GOLDEVAL_JUDGE_API_KEY")
    if key:
        settings.api_key = key
    user = os.environ.get("GOLDEVAL_JUDGE_USER")
    if user:
        settings.user = user
    password = os.environ.get("GOLDEVAL_JUDGE_PASSWORD")
    if password:
        settings.password = password
    try:
        check_credential(settings.api_key, "GOLDEVAL_JUDGE_API_KEY" if key else "OPENAI_API_KEY")
    except GoldevalError as exc:
        raise pytest.UsageError(f"judge: {exc}") from None
    settings.read_timeout = s.provider.read_timeout
    settings.connect_timeout = s.provider.connect_timeout
    settings.retries = s.provider.retries
    settings.call_timeout = s.provider.call_timeout
    settings.max_response_bytes = s.provider.max_response_bytes
    settings.run_deadline = s.provider.run_deadline
    # A limiter of its own when the judge asks another server (Meter.share gives it the
    # generation one when it asks the same server); the prices are the run's.
    settings.max_concurrency = s.provider.max_concurrency
    settings.adaptive = s.provider.adaptive
    settings.prices = s.provider.prices
    return settings


#: pytest's options that select items from its cache of the last session, not by the dataset.
CACHE_SELECTIONS = (("lf", "--lf"), ("stepwise", "--sw"), ("stepwise_skip", "--sw-skip"))


def refuse_cache_selection(config: pytest.Config) -> None:
    """``--lf`` and ``--sw`` run the rows that failed last time: the run of that selection,
    with no baseline to say it is partial, passed its thresholds on the subset (GATE PASS,
    exit 0, LATEST moved to it). A golden run is a selection the user names (``-k``, ``-m``,
    node ids, ``--golden-run-key`` to retry what failed): refused, a usage error."""
    for dest, flag in CACHE_SELECTIONS:
        if config.getoption(dest, default=False):
            raise pytest.UsageError(
                f"{flag} selects rows from pytest's cache of the last session: a golden run of "
                "that selection is no verdict on the dataset. Name the selection (-k, -m, node "
                "ids), or retry what failed with --golden-run-key=KEY"
            )

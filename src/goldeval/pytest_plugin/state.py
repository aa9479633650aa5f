"""Run state of one pytest session (kept in ``config.stash``) and the per-item glue.

The plugin module stays thin: it forwards hooks here. Everything that decides a verdict lives
in pure modules (graders, rollup, metrics, comparison, gate); this module wires them to pytest.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from goldeval.core import limits
from goldeval.core.errors import RERUN_HINT, GoldevalError, ProviderError
from goldeval.core.models import AttemptRecord, JudgeRecord, Mode, Status
from goldeval.core.secrets import SecretMasker, run_secrets
from goldeval.core.settings import ProviderSettings, RunSettings, provider_from_env
from goldeval.dataset.case import GoldenCase
from goldeval.dataset.manifest import find_manifest, read_manifest
from goldeval.dataset.rows import RESERVED_TAGS, Dataset, load_dataset, resolve_dataset, rows_file
from goldeval.graders.applicability import Applicability
from goldeval.graders.base import Grader
from goldeval.graders.contract import ContractGrader
from goldeval.judge.runner import DEFAULT_RUBRIC, Judge
from goldeval.pipeline.attempt import (
    NoRetriever,
    Pipeline,
    as_retriever,
    case_facts,
    failure_message,
)
from goldeval.pipeline.retriever import LexicalRetriever
from goldeval.providers.base import (
    Answer,
    Provider,
    as_provider,
    error_from_exception,
    resolve,
)
from goldeval.providers.budget import (
    Budget,
    Meter,
    estimate_usage,
    install_meter,
    parse_prices,
)
from goldeval.providers.cache import CachedProvider
from goldeval.providers.fixture import FixtureProvider, answer_sidecar
from goldeval.pytest_plugin.config_keys import STATE_KEY, reserved_marks
from goldeval.pytest_plugin.outcomes import (
    ENDS_ATTEMPT,
    PYTEST_OUTCOMES,
    SkippedByOutcome,
    attempt_outcome,
)
from goldeval.pytest_plugin.params import GoldenParam, param_of
from goldeval.pytest_plugin.prefetch import Prefetcher
from goldeval.pytest_plugin.recording import session_recorder
from goldeval.results.run_document import RunCollector, attempt_payload, new_run_id

PAYLOAD_ATTR = "goldeval"
#: errorKind of an attempt whose call phase ran a second time in one process (a rerun plugin).
RERUN_KIND = "RERUN"


def refuse_rerun_plugins(config: pytest.Config) -> None:
    """Rerun and repeat plugins are refused with ``--golden`` (usage error, exit 4).

    pytest-rerunfailures hides the failed tries of an attempt (only the last one counts) and
    pytest-repeat runs every attempt N times under one key (only the last one is kept): both
    would report a pass rate the model never had. ``--golden-attempts`` is the honest way to
    try an attempt several times. Other rerun plugins (flaky, a marker) are caught per item:
    see :func:`grade_item` and ``Controller.pytest_runtest_logreport``.
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


def settings_from_config(config: pytest.Config) -> RunSettings:
    mode = Mode(_opt(config, "golden_mode", "fixture"))
    attempts = int(_opt(config, "golden_attempts", 1))
    if attempts < 1:
        raise pytest.UsageError("--golden-attempts must be at least 1")
    provider_name = str(_opt(config, "golden_provider", "ollama")).lower()
    models_opt = _opt(config, "golden_models")
    models = [m.strip() for m in models_opt.split(",") if m.strip()] if models_opt else []
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
    # A path typed on the command line is relative to where pytest was started (as
    # --junitxml); the ini value and the default are the project's: relative to the rootdir,
    # so pytest started in any subfolder writes the same .goldeval/ (docs: "Project root").
    typed = _opt(config, "golden_out", None)
    out = Path(typed or config.getini("golden_out") or ".goldeval/runs")
    if not out.is_absolute():
        out = (Path(config.invocation_params.dir) if typed else Path(config.rootpath)) / out
    artifacts = str(_opt(config, "golden_artifacts", "failure"))
    deadline = _opt(config, "golden_deadline")
    return RunSettings(
        dataset=config.getoption("golden"),
        mode=mode,
        attempts=attempts,
        out_dir=out,
        artifacts=artifacts,
        provider=provider,
        models=models,
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


class GoldenSession:
    """Everything one pytest process knows about the golden run."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = settings_from_config(config)
        self.project_root = Path(config.rootpath)
        golden_root = Path(config.getini("golden_root") or "golden")
        if not golden_root.is_absolute():
            golden_root = self.project_root / golden_root
        self.golden_root = golden_root
        try:
            self.dataset_dir = resolve_dataset(
                self.settings.dataset, golden_root, Path(config.invocation_params.dir)
            )
        except GoldevalError as exc:
            raise pytest.UsageError(str(exc)) from None
        self.target = self._collect_target()
        save = self.settings.save_baseline
        if save and not self.settings.force_save_baseline:
            save_path = Path(save)
            if not save_path.is_absolute():
                save_path = Path(config.invocation_params.dir) / save_path
            if save_path.exists():
                raise pytest.UsageError(
                    f"{save}: baseline already exists; pass --golden-force-save-baseline to "
                    "overwrite it"
                )
        self.dataset: Dataset | None = None
        self.graders: list[Grader] | None = None
        self.collector = RunCollector(
            keep_passing_output=self.settings.artifacts == "always"
            or self.settings.mode is Mode.RECORD,
            case_info=self.case_info,
            case_line=self.case_line,
            # One model unless --golden-models names several: never split into "side by side".
            one_model=None
            if len(self.settings.models) > 1
            else (self.settings.provider.model or ""),
        )
        self._cases_by_id: dict[str, GoldenCase] | None = None
        #: Records of items between grading and their deciding report, keyed by item. Not in
        #: item.stash: a key there grows every item's stash table for the whole session.
        self.records: dict[pytest.Item, AttemptRecord] = {}
        self.started = datetime.now().astimezone()
        self.started_monotonic = time.monotonic()
        self.deadline_at = (
            self.started_monotonic + self.settings.deadline if self.settings.deadline else None
        )
        if self.settings.deadline:
            # Calls in flight end by the run deadline too, not only the starting of attempts
            # (the HTTP providers read it; started with deadline_at, to the microsecond).
            self.settings.provider.run_deadline = limits.Deadline(self.settings.deadline)
        self.is_worker = hasattr(config, "workerinput")
        self.run: dict[str, Any] | None = None
        self.exit_reason: str | None = None
        #: The decision on a session that recorded nothing (a signal before any attempt was
        #: graded), as (code, reason): the terminal still says why it exits so.
        self.unrecorded_decision: tuple[int, str] | None = None
        self._pipelines: dict[tuple[int, int], Pipeline] = {}
        self._graders_in_use: list[str] | None = None
        self._fixtures: tuple[Any, Any, list[Grader]] | None = None
        self.skipped_by_deadline = 0
        #: Attempts SKIPPED (reason budget), counted by the controller from every report.
        self.skipped_by_budget = 0
        self.budget = _process_budget(self.settings)
        #: The budget and the limiters every live call of this process shares (generation,
        #: judge, embeddings); installed for the embedding clients the graders make.
        self.meter = Meter(self.budget, concurrency=self.settings.provider.max_concurrency)
        install_meter(self.meter)
        config.add_cleanup(lambda: install_meter(None))
        #: failed reports of items that are not golden attempts (the user's own tests)
        self.other_failures = 0
        self._cached: dict[int, Provider] = {}
        #: golden_provider fixture value -> the Provider used (adapted, cached): once per process.
        self._adapted: dict[int, tuple[Any, Provider]] = {}
        self._prefetcher: Any = None
        self._judge: Any = None
        self._judge_settings: ProviderSettings | None = None
        self._judge_provider: Provider | None = None
        self._masker: SecretMasker | None = None
        self.run_dir: Path | None = None
        self.benchmark: list[dict[str, Any]] | None = None
        self.recorded: dict[str, list[str]] | None = None
        self.artifact_inventory: list[dict[str, Any]] = []

        #: The provider label the xdist workers built (a conftest override), on the controller.
        self.workers_provider: str | None = None
        self.run_id = new_run_id(self.settings.out_dir, self.started)
        self._recorder: Any = None
        self._provider: Provider | None = None
        if self.settings.mode is not Mode.FIXTURE:
            # An unknown provider is a usage error now, not an ERROR on every attempt later
            # (which would exit 75 and be retried forever).
            self._provider = self._make_provider()
            self.meter.share(self._provider)
        if self.settings.judge:
            self.judge_provider()  # a bad judge option is a usage error now, not per item
        if self.settings.rerun_errors and not self.settings.run_key:
            raise pytest.UsageError("--golden-rerun-errors needs --golden-run-key")
        refuse_rerun_plugins(config)
        #: Items whose call phase was graded in this process (a second one is a rerun).
        self.graded_items: set[pytest.Item] = set()
        #: "SIGTERM" once that signal arrived: the session ends as after Ctrl-C (INTERRUPTED).
        self.signal_received: str | None = None
        #: Called by the SIGTERM handler first (the controller forwards it to xdist workers).
        self.on_signal: list[Any] = []
        self._install_sigterm()
        if self.is_worker:
            # The controller closes the prefetcher in finish_session; a worker's would
            # otherwise run its queued model calls at interpreter exit, even after a signal.
            config.add_cleanup(self.close)

    def _install_sigterm(self) -> None:
        """SIGTERM ends the session the way Ctrl-C does (pytest's KeyboardInterrupt path).

        Without this, SIGTERM kills the process at once: no run folder, the store run left
        RUNNING. Restored when pytest unconfigures.
        """
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread
        previous = signal.getsignal(signal.SIGTERM)

        def on_sigterm(signum: int, frame: Any) -> None:
            first = self.signal_received is None
            self.signal_received = "SIGTERM"
            for callback in list(self.on_signal):
                try:
                    callback(signum)
                except Exception:
                    pass
            if first:
                raise KeyboardInterrupt("SIGTERM")

        signal.signal(signal.SIGTERM, on_sigterm)

        def restore() -> None:
            if signal.getsignal(signal.SIGTERM) is on_sigterm:
                signal.signal(signal.SIGTERM, previous)

        self.config.add_cleanup(restore)

    # -- collection ------------------------------------------------------------------------

    def _collect_target(self) -> Path:
        """The file the dataset's items hang off: its rows file, else its manifest."""
        manifest_path = find_manifest(self.dataset_dir)
        assert manifest_path is not None
        try:
            return rows_file(self.dataset_dir, read_manifest(manifest_path), manifest_path)
        except GoldevalError:
            return manifest_path  # collecting it reports the manifest problem as an error

    @property
    def recorder(self) -> Any:
        """The run store writer (controller only; None in an xdist worker), made on first use:
        a session that records nothing (listing items) never loads the store."""
        if self._recorder is None and not self.is_worker:
            self._recorder = session_recorder(self)
        return self._recorder

    def get_graders(self) -> list[Grader]:
        if self.graders is None:
            found: list[Grader] = []
            for group in self.config.hook.pytest_goldeval_register_graders(config=self.config):
                found.extend(group or [])
            self.graders = found
        return self.graders

    def load(self) -> Dataset:
        if self.dataset is None:
            # Fixtures are checked for the selected rows only, after deselection
            # (goldeval.pytest_plugin.collection.check_selected_fixtures).
            dataset = load_dataset(
                self.dataset_dir,
                project_root=self.project_root,
                graders=self.get_graders(),
                require_fixtures=False,
                reserved_tags=RESERVED_TAGS | reserved_marks(self.config),
            )
            # The contract's domain constants come from the dataset's manifest.
            self.graders = [
                ContractGrader(dataset.domain.contract) if isinstance(g, ContractGrader) else g
                for g in self.get_graders()
            ]
            self.dataset = dataset
        return self.dataset

    def graders_in_use(self) -> list[str]:
        """Names of the graders that grade at least one row of the dataset (cached), as the
        protocol's grader configuration names them (``Grader.config_name``: with the version
        from version 2 on)."""
        if self._graders_in_use is None:
            used = Applicability(self.get_graders()).used_by_any(self.load().cases)
            self._graders_in_use = sorted({g.config_name for g in used})
        return self._graders_in_use

    def params(self) -> list[GoldenParam]:
        dataset = self.load()
        models: list[str | None] = list(self.settings.models) or [None]
        return [
            GoldenParam(case, attempt, model)
            for model in models
            for case in dataset.cases
            for attempt in range(1, self.settings.attempts + 1)
        ]

    def case(self, case_id: str) -> GoldenCase | None:
        """The dataset's case of that id (the index is built on first use)."""
        if self._cases_by_id is None:
            self._cases_by_id = {c.id: c for c in self.load().cases}
        return self._cases_by_id.get(case_id)

    def case_info(self, case_id: str) -> dict[str, Any] | None:
        """The case's facts for the run (kinds, prompt, tags, line), from the dataset.

        Built when the run is rolled up rather than sent with every attempt: the controller
        loads the same dataset, and 100,000 info dicts held for the whole session cost more
        than looking each case up once at the end.
        """
        case = self.case(case_id)
        return None if case is None else case_facts(case)

    def case_line(self, case_id: str) -> int | None:
        case = self.case(case_id)
        return None if case is None else case.line

    def tag_markers(self) -> set[str]:
        return {tag for case in self.load().cases for tag in case.tags}

    @property
    def masker(self) -> SecretMasker:
        """The secrets this run knows, masked in every answer (goldeval.core.secrets), built
        once per process. Also in fixture mode: a conftest ``golden_provider`` may call an
        app there (replayed fixtures themselves are not screened, see :func:`_call`)."""
        if self._masker is None:
            self._masker = SecretMasker(self._known_secrets())
        return self._masker

    def _known_secrets(self) -> list[str]:
        similarity = self.load().manifest.grader_options.get("similarity") or {}
        key_env, embed_url = similarity.get("api_key_env"), similarity.get("base_url")
        providers = [self.settings.provider]
        if self.settings.judge:
            providers.append(self.judge_settings())
        return run_secrets(
            providers,
            os.environ,
            urls=[self.settings.store, embed_url if isinstance(embed_url, str) else None],
            key_variables=[key_env] if isinstance(key_env, str) and key_env else [],
        )

    # -- items -----------------------------------------------------------------------------

    def default_provider(self) -> Provider:
        dataset = self.load()
        if self.settings.mode is Mode.FIXTURE:
            return FixtureProvider(dataset.dir)
        if self._provider is not None:
            return self._provider
        return self._make_provider()

    def _make_provider(self) -> Provider:
        try:
            provider = self.config.hook.pytest_goldeval_make_provider(
                config=self.config,
                name=self.settings.provider.name,
                settings=self.settings.provider,
            )
        except GoldevalError as exc:
            raise pytest.UsageError(str(exc)) from None
        if provider is None:
            raise pytest.UsageError(
                f"unknown provider {self.settings.provider.name!r}: use ollama, openai, or "
                "register one with the pytest_goldeval_make_provider hook"
            )
        return provider  # type: ignore[no-any-return]

    def model_refusal(self) -> str | None:
        """Live runs: why a model of the run cannot be used on its server, else None.

        The built-in provider asks the server's model list once (``/v1/models``, ``/api/tags``;
        goldeval.providers.http.models_list); a server without a list, or a provider that
        cannot tell, refuses nothing. Only asked when the plugin's own provider will answer
        (see Controller._preflight).
        """
        if self.settings.mode is Mode.FIXTURE or self._provider is None:
            return None
        check = getattr(self._provider, "model_refusal", None)
        if not callable(check):
            return None
        models: list[str | None] = [*self.settings.models] or [self.settings.provider.model]
        for model in models:
            reason = check(model) if model else None
            if isinstance(reason, str) and reason:
                return reason
        return None

    def default_retriever(self) -> Any:

        dataset = self.load()
        if dataset.pack is None or not dataset.pack.chunks:
            return NoRetriever()
        return LexicalRetriever(dataset.pack.chunks, dataset.domain.retriever)

    def wrap_provider(self, provider: Provider) -> Provider:
        """Add the response cache around the provider once per process, if asked for."""
        if self.settings.cache_dir is None or self.settings.mode is Mode.FIXTURE:
            return provider
        cached = self._cached.get(id(provider))
        if cached is None:
            cached = CachedProvider(
                provider,
                self.settings.cache_dir,
                {"temperature": self.settings.provider.temperature},
                self.masker,
            )
            self._cached[id(provider)] = cached
        return cached

    def provider_for(self, provider: Any) -> Provider:
        """The golden_provider fixture's value as a Provider (adapted and cached), computed
        once per value: adapting inspects the callable, which is not free per attempt."""
        known = self._adapted.get(id(provider))
        if known is None or known[0] is not provider:
            known = (provider, self.wrap_provider(as_provider(provider)))
            self._adapted[id(provider)] = known
        return known[1]

    def prefetcher(self) -> Any:
        if self.settings.mode is Mode.FIXTURE or self.settings.concurrency <= 1:
            return None
        if self._prefetcher is None:
            self._prefetcher = Prefetcher(self.settings.concurrency)
        return self._prefetcher

    def judge(self) -> Any:
        if not self.settings.judge:
            return None
        if self._judge is None:
            self._judge = Judge(
                self.judge_provider(),
                self.judge_settings().model,
                self.load().rubric or DEFAULT_RUBRIC,
                self.settings.judge_repetitions,
                max_tokens=self.settings.judge_max_tokens,
                budget=self.budget,
                settings=self.judge_settings(),
                masker=self.masker,
            )
        return self._judge

    def judge_provider(self) -> Provider:
        """The judge's provider (made once, through the pytest_goldeval_make_provider hook)."""
        if self._judge_provider is None:
            judge_settings = self.judge_settings()
            try:
                provider = self.config.hook.pytest_goldeval_make_provider(
                    config=self.config, name=judge_settings.name, settings=judge_settings
                )
            except GoldevalError as exc:
                raise pytest.UsageError(f"judge: {exc}") from None
            if provider is None:
                raise pytest.UsageError(
                    f"unknown judge provider {judge_settings.name!r}: use ollama, openai, or "
                    "register one with the pytest_goldeval_make_provider hook"
                )
            # The judge waits on the generation limiter when it asks the same server.
            self.meter.share(provider)
            try:
                self._judge_provider = as_provider(provider)
            except TypeError:
                raise pytest.UsageError(
                    f"judge provider {judge_settings.name!r}: the pytest_goldeval_make_provider "
                    f"hook returned a {type(provider).__name__}, not a Provider"
                ) from None
        return self._judge_provider

    def judge_settings(self) -> ProviderSettings:
        """The judge's provider settings (cached): its own provider, base URL and credentials.

        ``--golden-judge-provider`` (default: the generation provider) and
        ``--golden-judge-base-url`` (default: ``--golden-base-url`` when the provider is the
        same, else that provider's environment: OLLAMA_HOST, OPENAI_BASE_URL). Credentials
        come from GOLDEVAL_JUDGE_API_KEY / GOLDEVAL_JUDGE_USER / GOLDEVAL_JUDGE_PASSWORD, else
        the provider's own variables (OPENAI_API_KEY, OLLAMA_USER, ...) or the URL's userinfo.
        A usage error (exit 4) names the judge option at fault.
        """
        if self._judge_settings is not None:
            return self._judge_settings
        s = self.settings
        name = str(_opt(self.config, "golden_judge_provider", s.provider.name)).strip().lower()
        same = name == s.provider.name
        model = s.judge_model or (s.provider.model if same else None)
        if model is None and name in ("ollama", "openai"):
            raise pytest.UsageError(
                f"--golden-judge-provider={name} differs from the generation provider: pass "
                "--golden-judge-model=NAME as well"
            )
        judge_url = _opt(self.config, "golden_judge_base_url")
        base_url = judge_url or (_opt(self.config, "golden_base_url") if same else None)
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
        self._judge_settings = settings
        return settings

    def close(self) -> None:
        if self._prefetcher is not None:
            self._prefetcher.close()
        if self._judge_provider is not None:
            self._judge_provider.close()

    def pipeline(self, graders: list[Grader], retriever: Any) -> Pipeline:
        key = (id(graders), id(retriever))
        pipe = self._pipelines.get(key)
        if pipe is None:
            pipe = Pipeline(
                self.load(),
                list(graders),
                as_retriever(retriever),
                masker=self.masker,
                refuse_secrets=self.settings.mode is Mode.RECORD,
            )
            self._pipelines[key] = pipe
        return pipe


def session_fixtures(state: GoldenSession, item: pytest.Item) -> tuple[Any, Any, list[Grader]]:
    """golden_provider, golden_retriever and golden_graders, looked up on the first item.

    Through the item's own fixture request, so conftest overrides apply as usual; the
    per-item fixtures take no ``request`` (see goldeval.pytest_plugin.fixtures), hence the
    attribute.
    """
    if state._fixtures is None:
        # No public way: the prefetch needs the session fixtures before the item's own setup
        # (pytest builds the request then). tests/unit/test_pytest_internals.py checks it.
        request = getattr(item, "_request", None)
        if not isinstance(request, pytest.FixtureRequest):
            raise GoldevalError(f"{item.nodeid}: pytest gave the item no fixture request")
        state._fixtures = (
            request.getfixturevalue("golden_provider"),
            request.getfixturevalue("golden_retriever"),
            request.getfixturevalue("golden_graders"),
        )
    return state._fixtures


def state_of(config: pytest.Config) -> GoldenSession:
    return config.stash[STATE_KEY]


class _DeadlinePassed:
    """Marker result: the call was not started because the deadline had passed."""


class _BudgetSpent:
    """Marker result: the call was not started because the cost/token budget was spent."""


def _process_budget(settings: RunSettings) -> Budget:
    """This process's share of ``--golden-max-cost`` / ``--golden-max-tokens``: each xdist
    worker spends its own, so each gets the budget divided by the number of workers."""
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 1))
    max_cost = settings.max_cost / workers if settings.max_cost is not None else None
    max_tokens = max(1, settings.max_tokens // workers) if settings.max_tokens is not None else None
    return Budget(max_cost=max_cost, max_tokens=max_tokens)


def _call(
    state: GoldenSession,
    provider: Provider,
    pipeline: Pipeline,
    param: GoldenParam,
    model: str | None,
) -> Any:
    """One provider call; returns the Answer or the ProviderError (futures keep either)."""
    if state.deadline_at is not None and time.monotonic() > state.deadline_at:
        return _DeadlinePassed()
    budget = state.budget
    if budget.active and budget.exhausted():
        return _BudgetSpent()
    start = time.perf_counter()
    try:
        # Inside the try: a prompt template that fails to render is a TEMPLATE_ERROR; the
        # retriever runs here too (its first call for this case).
        req = pipeline.request(param.case, param.attempt, model)
    except ENDS_ATTEMPT as exc:
        return _timed(attempt_outcome(exc, "retriever") or exc, start)
    try:
        answer = resolve(provider.complete(req))
    except ENDS_ATTEMPT as exc:
        return _timed(attempt_outcome(exc, "provider") or exc, start)
    except Exception as exc:  # a Provider subclass's own exception: classified as a callable's
        return _timed(error_from_exception(exc, provider.name or type(provider).__name__), start)
    if isinstance(answer, Answer) and state.settings.mode is not Mode.FIXTURE:
        # No usage in the answer (a stream without it, a plain callable): estimated, so the
        # budget still sees the call and the run says the figure is an estimate.
        estimate_usage(answer, req, state.settings.provider, model)
        if budget.active:
            budget.spend_answer(answer)
    if not isinstance(answer, Answer) or isinstance(provider, FixtureProvider):
        # A replayed fixture is a committed file, screened when it was recorded: fixture
        # runs pay nothing for masking.
        return answer
    try:
        # Every answer enters the run here: masked before anything grades or keeps it.
        return pipeline.screen(param.case, answer)
    except ProviderError as exc:  # record mode refused an answer holding a secret
        exc.duration_ms = answer.duration_ms  # type: ignore[attr-defined]
        return exc


def _timed(outcome: BaseException | SkippedByOutcome, start: float) -> Any:
    """A ProviderError with the time it took (the HTTP providers set their own)."""
    if isinstance(outcome, ProviderError) and getattr(outcome, "duration_ms", None) is None:
        outcome.duration_ms = max(1, round((time.perf_counter() - start) * 1000))  # type: ignore[attr-defined]
    return outcome


def attempt_model(state: GoldenSession, param: GoldenParam) -> str | None:
    """The model an attempt of ``param`` is recorded under: its ``--golden-models`` entry,
    else the run's model. Every record of the session (graded, ERROR, SKIPPED, lost) carries
    it, so one session is never split into "models side by side"."""
    return param.model or state.settings.provider.model


def _utf8_clean(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def obtain_answer(
    state: GoldenSession, item: pytest.Item, param: GoldenParam, case: GoldenCase
) -> Answer:
    """Setup phase: call the provider. Infrastructure faults become a pytest ERROR."""
    provider, retriever, graders = session_fixtures(state, item)
    pipeline = state.pipeline(graders, retriever)
    collected = param
    if case is not param.case:  # golden_case was overridden in a conftest
        param = GoldenParam(case, param.attempt, param.model)
    provider_obj = state.provider_for(provider)
    model = attempt_model(state, param)

    def model_of(p: GoldenParam) -> str | None:
        return attempt_model(state, p)

    prefetch = state.prefetcher() if provider_obj.thread_safe else None
    start = time.perf_counter()
    try:
        # Prefetch only when this item's case is the collected one (no golden_case override).
        if prefetch is not None and collected is param:

            def compute(it: pytest.Item) -> Any:
                p = param_of(it)
                assert p is not None
                return _call(state, provider_obj, pipeline, p, model_of(p))

            def eligible(it: pytest.Item) -> bool:
                return param_of(it) is not None

            outcome = prefetch.answer(item, compute, eligible)
        else:
            outcome = _call(state, provider_obj, pipeline, param, model)
    except PYTEST_OUTCOMES as exc:
        # pytest-timeout's signal method fired while this thread waited for the call (the
        # prefetch pool runs it): the attempt ends here, as an ERROR TIMEOUT.
        outcome = _timed(attempt_outcome(exc, "provider") or exc, start)
    if isinstance(outcome, SkippedByOutcome):
        state.records[item] = pipeline.skipped_record(case, param.attempt, outcome.reason, model)
        pytest.skip(outcome.reason)
    if isinstance(outcome, _DeadlinePassed):
        state.skipped_by_deadline += 1
        state.records[item] = pipeline.skipped_record(case, param.attempt, "deadline", model)
        pytest.skip("deadline: attempt not started before --golden-deadline")
    if isinstance(outcome, _BudgetSpent):
        state.budget.skipped += 1
        state.records[item] = pipeline.skipped_record(case, param.attempt, "budget", model)
        pytest.skip(f"budget: attempt not started, spent {state.budget.describe()}")
    if isinstance(outcome, ProviderError):
        elapsed = getattr(outcome, "duration_ms", 0)
        state.records[item] = pipeline.error_record(case, param.attempt, outcome, model, elapsed)
        state.records[item].queue_ms = getattr(outcome, "queue_ms", None)
        pytest.fail(
            f"golden case {case.id} attempt {param.attempt}: ERROR {outcome.kind} after "
            f"{outcome.tries} tr{'y' if outcome.tries == 1 else 'ies'}: "
            f"{state.records[item].error_message}\n"
            + (
                "(infrastructure, not a quality verdict: retry the run)"
                if outcome.retryable
                else "(not a quality verdict; retrying will not help: change the model, "
                "configuration or row)"
            ),
            pytrace=False,
        )
    answer: Answer = outcome
    if answer.text is not None and not _utf8_clean(answer.text):
        # A lone surrogate (a model cut mid-emoji, a broken app) cannot be written as UTF-8
        # anywhere downstream: grade and store the text with it replaced.
        answer.text = answer.text.encode("utf-8", "replace").decode("utf-8")
    if answer.model is None:
        answer.model = model
    # The test function takes only this fixture: asking for `request` there too would make
    # pytest build another fixture definition per item.
    answer._item = item
    answer._graded_with = (pipeline, param)
    return answer


def grade_item(answer: Answer) -> None:
    """Call phase: grade with the hard graders; a FAIL shows its violations, no traceback."""
    item = answer._item
    state = state_of(item.config)
    pipeline, param = answer._graded_with
    case = param.case
    if item in state.graded_items:
        # A rerun plugin (flaky, a rerun marker) ran this item's call phase again: the
        # earlier try is hidden or would be overwritten. Never grade it silently twice.
        message = (
            f"golden case {case.id} attempt {param.attempt} ran its call phase again in one "
            f"session (a rerun plugin such as flaky or pytest-rerunfailures): {RERUN_HINT}"
        )
        state.records[item] = AttemptRecord(
            case_id=case.id,
            index=param.attempt,
            model=attempt_model(state, param),
            status=Status.ERROR,
            error_kind=RERUN_KIND,
            error_message=message,
        )
        pytest.fail(message, pytrace=False)
    state.graded_items.add(item)
    # The run's model identity (the answer may name the model that answered differently).
    model = attempt_model(state, param)
    try:
        record = pipeline.grade(case, param.attempt, answer, model)
    except ENDS_ATTEMPT as exc:
        # A grader crashed, called pytest.fail/skip or ran into pytest-timeout: never a
        # quality FAIL, never a pass.
        ended = attempt_outcome(exc, "grader") or exc
        if isinstance(ended, SkippedByOutcome):
            state.records[item] = pipeline.skipped_record(case, param.attempt, ended.reason, model)
            pytest.skip(ended.reason)
        if not isinstance(ended, ProviderError):
            raise
        state.records[item] = pipeline.error_record(case, param.attempt, ended, model)
        pytest.fail(
            f"golden case {case.id} attempt {param.attempt}: ERROR {ended.kind}: {ended.message}",
            pytrace=False,
        )
    if state.settings.mode is Mode.RECORD:
        # Tool calls, finish reason and usage go to the fixture's JSON sidecar.
        record.recorded_answer = answer_sidecar(answer)
    judge = state.judge()
    if judge is not None:
        try:
            judge.judge(case, record, answer, pipeline.retrieve(case))
        except PYTEST_OUTCOMES as exc:
            # The judge is soft: its fault is recorded on its result, the hard verdict stands
            # (docs/methodology.md), also when the fault is a pytest outcome or a timeout.
            fault = attempt_outcome(exc, "judge")
            what = f"SKIPPED: {fault.reason}" if isinstance(fault, SkippedByOutcome) else fault
            record.judge = JudgeRecord(decision="PENDING", error=f"JUDGE_ERROR: {what}")
    state.records[item] = record
    hook = item.config.hook.pytest_goldeval_attempt_graded
    if hook.get_hookimpls():
        hook(config=item.config, record=record.dump())
    if record.status is Status.FAIL:
        pytest.fail(failure_message(record), pytrace=False)


def payload_for(state: GoldenSession, record: AttemptRecord) -> dict[str, Any]:
    """What travels on the report (see goldeval.results.run_document.attempt_payload); the
    controller looks
    the case's facts up in its own copy of the dataset (GoldenSession.case_info)."""
    return attempt_payload(record, state.collector.keep_passing_output)

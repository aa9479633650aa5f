"""Run state of one pytest session (kept in ``config.stash``): what the process knows about
the golden run and the objects it makes once (dataset, provider, judge, pipelines, runners).

The settings come from goldeval.pytest_plugin.run_settings; one item's attempt goes through
goldeval.pytest_plugin.attempts (pytest's side) and goldeval.pipeline.orchestration (the rest).
"""

from __future__ import annotations

import os
import time
from collections.abc import Hashable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from goldeval.core import limits
from goldeval.core.errors import GoldevalError
from goldeval.core.models import AttemptRecord, Mode
from goldeval.core.secrets import SecretMasker, declared_forms, run_secrets
from goldeval.core.settings import ProviderSettings
from goldeval.dataset.case import GoldenCase
from goldeval.dataset.discovery import check_golden_root
from goldeval.dataset.manifest import find_manifest, read_manifest
from goldeval.dataset.rows import RESERVED_TAGS, Dataset, load_dataset, resolve_dataset, rows_file
from goldeval.graders.applicability import Applicability
from goldeval.graders.base import Grader
from goldeval.graders.contract import ContractGrader
from goldeval.judge.runner import DEFAULT_RUBRIC, Judge
from goldeval.pipeline.attempt import NoRetriever, Pipeline, as_retriever, case_facts
from goldeval.pipeline.orchestration import RERUN_KIND, AttemptRunner
from goldeval.pipeline.retriever import LexicalRetriever
from goldeval.providers.base import Provider, as_provider
from goldeval.providers.budget import Meter, install_meter
from goldeval.providers.cache import CachedProvider
from goldeval.providers.fixture import FixtureProvider
from goldeval.pytest_plugin.adaptive import AdaptiveAttempts
from goldeval.pytest_plugin.config_keys import PAYLOAD_ATTR, STATE_KEY, reserved_marks
from goldeval.pytest_plugin.params import GoldenParam
from goldeval.pytest_plugin.prefetch import Prefetcher
from goldeval.pytest_plugin.recording import session_recorder
from goldeval.pytest_plugin.run_settings import (
    judge_provider_settings,
    process_budget,
    refuse_existing_baseline,
    refuse_unfit_options,
    settings_from_config,
)
from goldeval.pytest_plugin.variant_baselines import check_baseline_options
from goldeval.pytest_plugin.variant_providers import (
    judge_client,
    make_provider,
    model_checks,
    servers,
    start_variant_judges,
    start_variant_providers,
)
from goldeval.pytest_plugin.variants import session_variants
from goldeval.results.attempt_payloads import attempt_payload
from goldeval.results.finalise import Finalisation
from goldeval.results.run_document import RunCollector, new_run_id
from goldeval.results.run_json import RunJson

# RERUN_KIND: the controller reads it from here (an attempt graded twice, see
# goldeval.pipeline.orchestration).
__all__ = ["PAYLOAD_ATTR", "RERUN_KIND", "GoldenSession", "payload_for", "state_of"]


class GoldenSession:
    """Everything one pytest process knows about the golden run."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.project_root = Path(config.rootpath)
        self.golden_root, self.dataset_dir = self._dataset_place()
        #: The manifest's variants this session runs (None: no variants, the usual run).
        self.variants = session_variants(config, self.dataset_dir)
        self.settings = settings_from_config(config, self.variants)
        self.target = self._collect_target()
        check_baseline_options(self.settings, self.variants)
        refuse_existing_baseline(config, self.settings, self.variants)
        self.dataset: Dataset | None = None
        self.graders: list[Grader] | None = None
        self.collector = self._new_collector()
        self._cases_by_id: dict[str, GoldenCase] | None = None
        #: Records of items between grading and their deciding report, keyed by item. Not in
        #: item.stash: a key there grows every item's stash table for the whole session.
        self.records: dict[pytest.Item, AttemptRecord] = {}
        self.started = datetime.now().astimezone()
        self.started_monotonic = time.monotonic()
        self.deadline_at = self._start_deadline()
        self.is_worker = hasattr(config, "workerinput")
        self.adaptive = AdaptiveAttempts.of(self.settings)  # --golden-attempts=auto:MAX
        self.run: RunJson | None = None
        self.exit_reason: str | None = None
        #: (code, reason) of a session that recorded nothing, or selected nothing (run key).
        self.unrecorded_decision: tuple[int, str] | None = None
        self._pipelines: dict[tuple[int, int, str | None], Pipeline] = {}
        #: One AttemptRunner per (provider, graders, retriever, variant): attempts.runner_for.
        self._runners: dict[tuple[int, int, int, str | None], AttemptRunner] = {}
        self._graders_in_use: list[str] | None = None
        self._fixtures: tuple[Any, Any, list[Grader]] | None = None
        self.skipped_by_deadline = 0
        #: Attempts SKIPPED (reason budget), counted by the controller from every report.
        self.skipped_by_budget = 0
        self.budget = process_budget(self.settings)
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
        #: The session's judge (key None) and the variants' own judge models' (goldeval.judge).
        self._judges: dict[Any, Any] = {}
        self._judge_settings: ProviderSettings | None = None
        self._judge_provider: Provider | None = None
        self._masker: SecretMasker | None = None
        self.run_dir: Path | None = None
        self.benchmark: list[RunJson] | None = None
        self.recorded: dict[str, list[str]] | None = None
        self.artifact_inventory: list[dict[str, Any]] = []
        #: What this process has written towards its run folders, so a failure part-way can be
        #: rolled back (:mod:`goldeval.results.finalise`).
        self.finalisation = Finalisation()
        #: The provider label the xdist workers built (a conftest override), on the controller.
        self.workers_provider: str | None = None
        self.run_id = new_run_id(self.settings.out_dir, self.started)
        self._recorder: Any = None
        self._provider: Provider | None = None
        self._start_providers()
        if self.settings.rerun_errors and not self.settings.run_key:
            raise pytest.UsageError("--golden-rerun-errors needs --golden-run-key")
        refuse_unfit_options(config)
        #: Items whose call phase was graded in this process (a second one is a rerun).
        self.graded_items: set[Hashable] = set()
        #: "SIGTERM" once that signal arrived: the run is INTERRUPTED and the verdict gives 75
        #: (set by :mod:`goldeval.pytest_plugin.stopping`).
        self.signal_received: str | None = None
        #: "SIGTERM" or "SIGINT": the signal that asked the session to stop between items.
        self.stopped_by: str | None = None
        #: Called by the stop request first (the controller forwards it to xdist workers).
        self.on_signal: list[Any] = []
        if self.is_worker:
            # The controller closes the prefetcher in finish_session; a worker's would
            # otherwise run its queued model calls at interpreter exit, even after a signal.
            config.add_cleanup(self.close)

    def _dataset_place(self) -> tuple[Path, Path]:
        """The golden root (``golden_root`` ini key, relative to the project) and the folder of
        the dataset ``--golden`` names; a name that resolves to none is a usage error."""
        golden_root = Path(self.config.getini("golden_root") or "golden")
        if not golden_root.is_absolute():
            golden_root = self.project_root / golden_root
        try:
            check_golden_root(golden_root, self.project_root)
            dataset_dir = resolve_dataset(
                self.config.getoption("golden"),
                golden_root,
                Path(self.config.invocation_params.dir),
            )
        except GoldevalError as exc:
            raise pytest.UsageError(str(exc)) from None
        return golden_root, dataset_dir

    def _start_deadline(self) -> float | None:
        """``time.monotonic()`` after which no attempt starts (None: no --golden-deadline)."""
        if not self.settings.deadline:
            return None
        # Calls in flight end by the run deadline too, not only the starting of attempts
        # (the HTTP providers read it; started with deadline_at, to the microsecond).
        self.settings.provider.run_deadline = limits.Deadline(self.settings.deadline)
        return self.started_monotonic + self.settings.deadline

    def _new_collector(self) -> RunCollector:
        s = self.settings
        return RunCollector(
            keep_passing_output=s.artifacts == "always" or s.mode is Mode.RECORD,
            case_info=self.case_info,
            case_line=self.case_line,
            # One run unless several models or variants run: never split into "side by side".
            one_model=None if s.side_by_side else (s.provider.model or ""),
        )

    def _start_providers(self) -> None:
        """Live runs make their provider now, the judge's too: an unknown provider or a bad
        judge option is a usage error now, not an ERROR on every attempt later (which would
        exit 75 and be retried forever)."""
        if self.settings.mode is not Mode.FIXTURE:
            self._provider = self._make_provider()
            self.meter.share(self._provider)
            start_variant_providers(self)
        if self.settings.judge:
            self.judge_provider()
            start_variant_judges(self)

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
        if self.variants is not None:
            # Case by case, variants side by side: their calls are in flight together.
            return [
                GoldenParam(case, attempt, v.model, v.name)
                for case in dataset.cases
                for attempt in range(1, self.settings.attempts + 1)
                for v in self.variants.selected
            ]
        models: list[str | None] = [*self.settings.models] or [None]
        return [
            GoldenParam(case, attempt, model)
            for model in models
            for case in dataset.cases
            for attempt in range(1, self.settings.attempts + 1)
        ]

    def variant_name(self, key: str | None) -> str | None:
        """The name of the variant whose run ``key`` is (the collector's key: the variant's
        name, or the one model of a session that runs a single variant); None without
        variants."""
        if self.variants is None:
            return None
        if self.variants.get(key) is not None:
            return key
        return self.variants.names[0] if len(self.variants.selected) == 1 else None

    def label_model(self, label: str | None) -> str | None:
        """The model of an item id's label (a variant's name, else the model itself)."""
        return self.variants.model_of(label) if self.variants is not None else label

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
        app there (replayed fixtures themselves are not screened: AttemptRunner.call)."""
        if self._masker is None:
            self._masker = SecretMasker(self._known_secrets())
        return self._masker

    def _known_secrets(self) -> list[str]:
        similarity = self.load().manifest.grader_options.get("similarity") or {}
        key_env, embed_url = similarity.get("api_key_env"), similarity.get("base_url")
        providers = [self.settings.provider]
        if self.variants is not None:  # the variants' own providers and judges (their keys)
            providers += [settings for settings, _ in self.variants.own_clients]
        if self.settings.judge:
            providers.append(self.judge_settings())
        return run_secrets(
            providers,
            os.environ,
            urls=[self.settings.store, embed_url if isinstance(embed_url, str) else None],
            key_variables=[key_env] if isinstance(key_env, str) and key_env else [],
        ) + declared_forms(self.config.hook.pytest_goldeval_secrets(config=self.config))

    # -- items -----------------------------------------------------------------------------

    def default_provider(self) -> Provider:
        dataset = self.load()
        if self.settings.mode is Mode.FIXTURE:
            return FixtureProvider(dataset.dir)
        if self._provider is not None:
            return self._provider
        return self._make_provider()

    def _make_provider(self) -> Provider:
        return make_provider(self.config, self.settings.provider)  # type: ignore[no-any-return]

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
        for ask, model in model_checks(self, check):
            reason = ask(model) if model and callable(ask) else None
            if isinstance(reason, str) and reason:
                # The server's list is its text: a proxy echoing the key as a model name.
                return self.masker.mask_message(reason)
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
        if self.settings.mode is Mode.FIXTURE or self.settings.concurrency <= 1 or self.adaptive:
            return None  # auto:MAX plans each round from the one before: nothing ahead
        if self._prefetcher is None:
            # Each server its share: variants on two servers call both at once, each up to
            # its own limit (the limiters still bound every server).
            self._prefetcher = Prefetcher(self.settings.concurrency * servers(self))
        return self._prefetcher

    def judge(self, variant: str | None = None) -> Any:
        """The judge that scores ``variant``'s answers (its own ``judge.model`` on the
        session's judge provider, else the session's judge), made once each; None when the
        session runs no judge."""
        if not self.settings.judge:
            return None
        chosen = self.variants.get(variant) if self.variants is not None else None
        own = chosen.judge if chosen is not None else None
        key = None if own is None else (own.provider, own.base_url, own.model)
        judge = self._judges.get(key)
        if judge is None:
            settings, provider = judge_client(self, chosen)
            judge = Judge(
                provider,
                settings.model,
                self.load().rubric or DEFAULT_RUBRIC,
                self.settings.judge_repetitions,
                max_tokens=self.settings.judge_max_tokens,
                budget=self.budget,
                settings=settings,
                masker=self.masker,
            )
            self._judges[key] = judge
        return judge

    def judge_provider(self) -> Provider:
        """The judge's provider (made once, through the pytest_goldeval_make_provider hook)."""
        if self._judge_provider is None:
            judge_settings = self.judge_settings()
            provider = make_provider(self.config, judge_settings, "judge")
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
        """The judge's provider settings (cached; see run_settings.judge_provider_settings)."""
        if self._judge_settings is None:
            self._judge_settings = judge_provider_settings(self.config, self.settings)
        return self._judge_settings

    def close(self) -> None:
        if self._prefetcher is not None:
            self._prefetcher.close()
        if self._judge_provider is not None:
            self._judge_provider.close()
        for _, provider in self.variants.own_clients if self.variants else ():
            provider.close()  # the variants' own (the session's closes with its fixture)

    def pipeline(
        self, graders: list[Grader], retriever: Any, variant: str | None = None
    ) -> Pipeline:
        """The pipeline of these fixture values and variant (made on first use): a variant's
        own prompt templates and name (its fixtures folder) are its pipeline's."""
        key = (id(graders), id(retriever), variant)
        pipe = self._pipelines.get(key)
        if pipe is None:
            chosen = self.variants.get(variant) if self.variants is not None else None
            pipe = Pipeline(
                self.load(),
                list(graders),
                as_retriever(retriever),
                masker=self.masker,
                refuse_secrets=self.settings.mode is Mode.RECORD,
                variant=chosen,
            )
            self._pipelines[key] = pipe
        return pipe


def state_of(config: pytest.Config) -> GoldenSession:
    return config.stash[STATE_KEY]


def payload_for(
    state: GoldenSession, record: AttemptRecord, variant: str | None = None
) -> dict[str, Any]:
    """What travels on the report (see goldeval.results.run_document.attempt_payload); the
    controller looks the case's facts up in its own copy of the dataset
    (GoldenSession.case_info). ``variant``: the variant the attempt ran (its run's key)."""
    keep = state.collector.keep_passing_output
    return attempt_payload(record, keep, variant, state.settings.artifacts != "never")

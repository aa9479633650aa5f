"""Public hooks of pytest-goldeval. Built-in graders and providers use these same hooks.

Implement them in a ``conftest.py`` or a plugin module; call shapes are chosen on purpose:
registration hooks collect a list from every implementation, pick-one hooks use
``firstresult``. All hooks are called with keyword arguments only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from goldeval.results.run_json import RunJson

if TYPE_CHECKING:
    from goldeval.core.settings import ProviderSettings
    from goldeval.graders.base import Grader
    from goldeval.providers.base import Provider
    from goldeval.results.documents import RunDocument


@pytest.hookspec
def pytest_goldeval_register_graders(config: pytest.Config) -> list[Grader]:
    """Return graders to add to every golden attempt.

    :param config: the pytest config.
    :return: a list of :class:`goldeval.graders.base.Grader` instances. Each grader declares
        the ``expect`` keys it owns; a key no grader owns is a collection error.
    """
    raise NotImplementedError


@pytest.hookspec(firstresult=True)
def pytest_goldeval_make_provider(
    config: pytest.Config, name: str, settings: ProviderSettings
) -> Provider | None:
    """Build the live provider called ``name`` (``--golden-provider``), or return None.

    :param config: the pytest config.
    :param name: the provider name, lower-case (``ollama``, ``openai`` or your own).
    :param settings: resolved options (model, base URL, timeouts, retries, credentials).
    :return: a :class:`goldeval.providers.base.Provider`; the first non-None result wins.
    """
    raise NotImplementedError


@pytest.hookspec
def pytest_goldeval_secrets(config: pytest.Config) -> list[str]:
    """Return credentials your code holds that goldeval does not know (a provider of your
    own reads ``GATEWAY_API_KEY``): they are masked like the run's own keys, in answers,
    error text, reports, recorded fixtures and the store, also when a model echoes one.

    :param config: the pytest config.
    :return: the secret values (empty strings and values under 8 characters are ignored
        in answers, as for the run's own credentials).
    """
    raise NotImplementedError


@pytest.hookspec
def pytest_goldeval_attempt_graded(config: pytest.Config, record: dict[str, Any]) -> None:
    """Called in the process that ran the item, after an attempt was graded.

    :param record: the attempt record as JSON-plain data (reference field names).
    """


@pytest.hookspec
def pytest_goldeval_run_finished(
    config: pytest.Config, run: RunJson, document: RunDocument
) -> None:
    """Called once on the controller with the finished run document (in a session of
    several models or variants: the first run's document with the session's exit decision).

    :param document: the run document typed
        (:class:`goldeval.results.documents.RunDocument`, run.json's fields by name).
    :param run: deprecated: the same document as run.json's JSON object; kept so existing
        implementations keep working. Take ``document`` instead (an implementation may name
        only the arguments it uses).
    """

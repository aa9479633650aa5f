"""The run's secret masker: credentials the run knows, masked in every answer (issue 32).

A model can echo a credential in an ordinary 200 answer (a proxy that repeats the
``Authorization`` header, an app under test that prints its environment, a key pasted into a
pack document). The HTTP client masks error bodies (:func:`goldeval.core.settings.secret_forms`);
this module masks the answers: the plugin builds one :class:`SecretMasker` per session from
every credential the run was given (:func:`run_secrets`), and the answer is masked where it
enters the pipeline (:meth:`goldeval.pipeline.attempt.Pipeline.screen`), before anything grades,
stores, reports or records it.

Only secrets the run knows are masked, not credential *shapes* (``Bearer ...``, ``sk-...``): a
pattern would also rewrite example tokens in legitimate answers (code that sets an
``Authorization`` header) and so change what the graders read, and a key the run does not
hold is not this run's leak.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from goldeval.core.echoes import echo_masker
from goldeval.core.errors import ConfigError
from goldeval.core.settings import MASK, ProviderSettings, secret_forms, url_secrets

#: Values shorter than this are not masked in answers. An answer is ordinary prose and code:
#: masking a short password ("admin", "ollama", "1234") would replace ordinary words, change
#: what the graders read and make reports unreadable, and a value that short is guessed, not
#: leaked. Error bodies still mask every value of 3 characters or more (``secret_forms``).
MIN_SECRET_LENGTH = 8

#: Environment variables whose value is an API key (the provider's, the judge's, the
#: embeddings'): read by goldeval.core.settings, pytest_plugin.state and providers.embeddings.
KEY_VARIABLES = ("OPENAI_API_KEY", "GOLDEVAL_JUDGE_API_KEY", "GOLDEVAL_EMBED_API_KEY")
#: (user, password) environment variables: the password and its ``Basic`` token.
PASSWORD_VARIABLES = (
    ("OLLAMA_USER", "OLLAMA_PASSWORD"),
    ("GOLDEVAL_JUDGE_USER", "GOLDEVAL_JUDGE_PASSWORD"),
)
#: Environment variables holding a URL: its userinfo password and credential parameters
#: (``?key=``, ``?access_token=``...) are secrets; GOLDEVAL_STORE may be a PostgreSQL URL.
URL_VARIABLES = ("OLLAMA_HOST", "OPENAI_BASE_URL", "GOLDEVAL_EMBED_URL", "GOLDEVAL_STORE")
#: The proxy variables httpx reads (trust_env, through urllib: any case, ``Https_Proxy``
#: too; a value without a scheme is http): their userinfo is sent as a Proxy-Authorization
#: header, which an echoing server repeats.
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")


def _proxy_urls(environ: Mapping[str, str]) -> list[str]:
    found = []
    for name, value in environ.items():
        if name.lower() in PROXY_VARIABLES and value:
            found.append(value if "://" in value else "http://" + value)
    return found


#: The evaluation service's API keys (``KEY:ROLE,...``): in the environment of a run the
#: service started (goldeval.server.worker copies its environment).
SERVICE_KEYS_VARIABLE = "GOLDEVAL_API_KEYS"


#: The marks excerpts put where they cut a text: ours (providers.http.wire, graders) and the
#: three dots of pytest's assertion messages and of some of our own short forms.
CUT_MARKS = ("\u2026", "...")
#: A secret's start before a cut mark (or its end after one) this long or longer is masked:
#: an excerpt cut before masking shows the start of a key (``'{xxx…xsk-PROBE-7c1e9f2a4…'``
#: showed 18 of its 19 characters). Shorter fragments say less than a key's public prefix.
MIN_CUT_FRAGMENT = 4


class _CutFinder:
    """Finds what an excerpt's cut left of a secret beside its mark: a secret's start
    (:data:`MIN_CUT_FRAGMENT` characters or more, not all of it) ending at a mark, or its end
    starting just after one. Driven by one scan for the secrets' first and last four
    characters (a regex of whole prefixes nests as deep as the key is long), then a bounded
    look for the mark: linear in the text."""

    __slots__ = ("_ends", "_scan", "_starts")

    def __init__(self, secrets: list[str]) -> None:
        self._starts: dict[str, list[str]] = {}
        self._ends: dict[str, list[str]] = {}
        for secret in secrets:
            if len(secret) > MIN_CUT_FRAGMENT:
                self._starts.setdefault(secret[:MIN_CUT_FRAGMENT], []).append(secret)
                self._ends.setdefault(secret[-MIN_CUT_FRAGMENT:], []).append(secret)
        pieces = sorted({*self._starts, *self._ends})
        # a lookahead: every position where a piece begins, overlapping ones too
        alternatives = "|".join(map(re.escape, pieces))
        self._scan = re.compile(f"(?=({alternatives}))") if pieces else None

    def spans(self, text: str) -> list[tuple[int, int]]:
        found: list[tuple[int, int]] = []
        if self._scan is None:
            return found
        for match in self._scan.finditer(text):
            at, piece = match.start(), match.group(1)
            end = at + MIN_CUT_FRAGMENT
            for cut in CUT_MARKS:
                for secret in self._starts.get(piece, ()):
                    mark = text.find(cut, at + MIN_CUT_FRAGMENT, at + len(secret))
                    if mark >= 0 and secret.startswith(text[at:mark]):
                        found.append((at, mark))
                for secret in self._ends.get(piece, ()):
                    mark = text.rfind(cut, max(0, end - len(secret) - len(cut) + 1), at)
                    if mark >= 0 and secret.endswith(text[mark + len(cut) : end]):
                        found.append((mark + len(cut), end))
        return found

    def mask(self, text: str) -> str:
        spans = sorted(self.spans(text))
        if not spans:
            return text
        out, kept = [], 0
        for start, end in spans:
            if end <= kept:
                continue
            out.append(text[kept:start] if start > kept else "")
            if start >= kept:
                out.append(MASK)
            kept = end
        out.append(text[kept:])
        return "".join(out)


class SecretMasker:
    """Replaces every known secret by ``***``: one compiled alternation, longest first, so a
    secret that contains another is masked whole. :meth:`mask_message` masks too what an
    excerpt's cut left of one beside its cut mark (:data:`CUT_MARKS`). Falsy (and free) when
    it knows none."""

    __slots__ = ("_cut", "_echoed", "_pattern", "size")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        kept = sorted({s for s in secrets if len(s) >= MIN_SECRET_LENGTH}, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, kept))) if kept else None
        #: The secrets quoted back in part (``sk-a%2Fb``, ``\\u002B``, ``&#43;``).
        self._echoed = echo_masker(tuple(kept))
        self._cut = _CutFinder(kept)
        #: How many forms are masked (shown in tests and debugging, never the values).
        self.size = len(kept)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def __repr__(self) -> str:  # never the secrets
        return f"<SecretMasker {self.size} form(s)>"

    def found(self, text: str) -> bool:
        """Whether ``text`` holds a known secret (or a cut one, as messages are masked)."""
        return self._pattern is not None and self.mask_message(text) != text

    def mask(self, text: str) -> str:
        """``text`` (an answer) with every known secret replaced by ``***`` (``text`` itself
        if none). Whole secrets only: an answer is what the graders read, and its own
        ellipses beside four characters of a key's public start are not a leak."""
        if self._pattern is None:
            return text
        if self._pattern.search(text) is not None:
            text = self._pattern.sub(MASK, text)
        return self._echoed.mask(text, MASK)

    def mask_message(self, text: str) -> str:
        """``text`` (an error, a report section, a warning, a failure) masked as
        :meth:`mask` does, and every piece of a secret that an excerpt's cut left beside its
        mark too: such text was cut before it was masked (a tool call's arguments at 80
        characters, pytest's assertion message), which showed most of a key."""
        text = self.mask(text)
        if self._pattern is not None and any(cut in text for cut in CUT_MARKS):
            text = self._cut.mask(text)
        return text

    def mask_data(self, value: Any) -> Any:
        """JSON-like data (tool-call arguments) with every string masked, keys included.
        Returns ``value`` itself when nothing in it changed."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            masked = {self.mask_data(k): self.mask_data(v) for k, v in value.items()}
            return value if masked == value else masked
        if isinstance(value, (list, tuple)):
            items = [self.mask_data(v) for v in value]
            return value if items == list(value) else type(value)(items)
        return value


def _service_keys(text: str) -> list[str]:
    """The keys of ``KEY:ROLE,...`` (goldeval.server.auth.KeyRing's format)."""
    items = (i.strip() for i in text.replace("\n", ",").split(","))
    return [i.rpartition(":")[0].strip() for i in items if ":" in i]


def run_secrets(
    providers: Iterable[ProviderSettings],
    environ: Mapping[str, str],
    *,
    urls: Iterable[str | None] = (),
    key_variables: Iterable[str] = (),
) -> list[str]:
    """Every form of every credential the run was given, to build its :class:`SecretMasker`.

    ``providers``: the generation and judge settings (key, user/password and their ``Basic``
    token, credential values of the base URL). ``environ``: the credential variables the
    project reads (:data:`KEY_VARIABLES`, :data:`PASSWORD_VARIABLES`, :data:`URL_VARIABLES`,
    :data:`SERVICE_KEYS_VARIABLE`), also when the run does not use them (a judge key in the
    environment of a run without ``--golden-judge`` is still a key). ``urls``: other
    configured URLs (``--golden-store``, the embeddings' base URL). ``key_variables``: further
    variables named as holding a key (``grader_options.similarity.api_key_env``).
    """
    found: list[str] = []
    for s in providers:
        found += secret_forms(s.user, s.password, s.api_key, url_secrets(s.base_url or ""))
    for user_var, password_var in PASSWORD_VARIABLES:
        found += secret_forms(environ.get(user_var), environ.get(password_var), None)
    for name in (*KEY_VARIABLES, *key_variables):
        found += secret_forms(None, None, environ.get(name))
    for url in (*urls, *(environ.get(name) for name in URL_VARIABLES), *_proxy_urls(environ)):
        found += secret_forms(None, None, None, url_secrets(url or ""))
    found += secret_forms(None, None, None, _service_keys(environ.get(SERVICE_KEYS_VARIABLE, "")))
    return found


def declared_forms(declared: Iterable[Iterable[Any] | None]) -> list[str]:
    """Every form of the values the ``pytest_goldeval_secrets`` implementations returned (a
    provider of the project's own holds a key goldeval cannot know of)."""
    forms: list[str] = []
    for values in declared:
        if isinstance(values, str):  # one secret returned bare: not its characters
            values = [values]
        if values is None:
            continue
        if not isinstance(values, (list, tuple, set, frozenset)):
            raise ConfigError(
                f"pytest_goldeval_secrets returned a {type(values).__name__}: return a list of "
                "the secret strings",
                field="pytest_goldeval_secrets",
            )
        for value in values:
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            if isinstance(value, str):
                forms += secret_forms(None, None, value)
    return forms

"""The run's secret masker (goldeval.core.secrets): what it masks, what it collects, and that
it costs nothing when it knows no secret (fixture mode)."""

from __future__ import annotations

import base64
import re
import time

import pytest

from goldeval.core.secrets import (
    KEY_VARIABLES,
    MIN_SECRET_LENGTH,
    URL_VARIABLES,
    SecretMasker,
    run_secrets,
)
from goldeval.core.settings import ProviderSettings, mask_secrets, secret_forms
from goldeval.providers import embeddings
from goldeval.providers.base import Answer, ToolCall, masked_answer
from goldeval.providers.fixture import recordable_attempt

KEY = "sk-unit-PLANTED-0123456789abcdef"


def test_masks_every_occurrence_longest_first() -> None:
    masker = SecretMasker([KEY, KEY[:10]])
    assert masker.mask(f"a {KEY} b {KEY[:10]} c {KEY}") == "a *** b *** c ***"
    assert masker.found(f"x{KEY}x") and not masker.found("nothing here")


def test_regex_characters_in_a_secret_are_literal() -> None:
    secret = "p.a+ss(w)o*rd[1]"
    masker = SecretMasker([secret])
    assert masker.mask(f"<{secret}>") == "<***>"
    assert masker.mask("pXa+ss(w)o*rd[1]") == "pXa+ss(w)o*rd[1]"


def test_values_shorter_than_the_minimum_are_not_masked() -> None:
    short = "x" * (MIN_SECRET_LENGTH - 1)
    masker = SecretMasker([short, "admin", ""])
    assert not masker and masker.size == 0
    assert masker.mask(f"{short} admin") == f"{short} admin"


def test_an_empty_masker_returns_its_input_untouched_and_costs_nothing() -> None:
    masker = SecretMasker()
    text = "y" * 1_000_000
    data = {"a": [text, {"b": text}]}
    assert masker.mask(text) is text and masker.mask_data(data) is data
    answer = Answer(text=text, tool_calls=[ToolCall("f", data)])
    assert masked_answer(answer, masker) is answer
    start = time.perf_counter()
    for _ in range(100_000):
        masked_answer(answer, masker)
    assert time.perf_counter() - start < 1.0  # an early return, not a scan of 1 MB


def test_mask_data_masks_values_and_keys_at_any_depth() -> None:
    masker = SecretMasker([KEY])
    data = {"h": {"Authorization": f"Bearer {KEY}"}, KEY: [1, KEY, {"x": (KEY, True)}]}
    assert masker.mask_data(data) == {
        "h": {"Authorization": "Bearer ***"},
        "***": [1, "***", {"x": ("***", True)}],
    }
    clean = {"a": ["b", 1, None]}
    assert masker.mask_data(clean) is clean


def test_masked_answer_covers_text_tool_calls_model_and_finish_reason() -> None:
    masker = SecretMasker([KEY])
    answer = Answer(
        text=f"key {KEY}",
        tool_calls=[ToolCall(f"f{KEY}", {"k": KEY}), ToolCall("g", {"n": 1})],
        model=f"m-{KEY}",
        finish_reason=KEY,
        input_tokens=3,
        tries=2,
    )
    masked = masked_answer(answer, masker)
    assert masked is not answer and answer.text == f"key {KEY}"  # the original is untouched
    assert masked.text == "key ***" and masked.model == "m-***" and masked.finish_reason == "***"
    assert masked.tool_calls == [ToolCall("f***", {"k": "***"}), ToolCall("g", {"n": 1})]
    assert (masked.input_tokens, masked.tries) == (3, 2)
    assert KEY not in repr(masked)
    clean = Answer(text="fine", tool_calls=[ToolCall("g", {"n": 1})])
    assert masked_answer(clean, masker) is clean


def test_masker_repr_never_shows_a_secret() -> None:
    assert KEY not in repr(SecretMasker([KEY])) and "1 form" in repr(SecretMasker([KEY]))


def _masks(secrets: list[str], value: str) -> bool:
    return SecretMasker(secrets).mask(f"<{value}>") == "<***>"


def test_run_secrets_collects_provider_settings() -> None:
    provider = ProviderSettings(
        name="ollama",
        user="someuser",
        password="pw-PLANTED-42@x",
        base_url="http://h:1/v1?api-key=q-PLANTED-7788&region=eu",
    )
    judge = ProviderSettings(name="openai", api_key=KEY)
    secrets = run_secrets([provider, judge], {})
    basic = base64.b64encode(b"someuser:pw-PLANTED-42@x").decode()
    for value in ("pw-PLANTED-42@x", "pw-PLANTED-42%40x", basic, "q-PLANTED-7788", KEY):
        assert _masks(secrets, value), value
    assert not _masks(secrets, "someuser") and not _masks(secrets, "eu")


def test_run_secrets_collects_the_credential_variables_the_project_reads() -> None:
    environ = {
        "OPENAI_API_KEY": "env-openai-PLANTED",
        "GOLDEVAL_JUDGE_API_KEY": "env-judge-PLANTED",
        "GOLDEVAL_EMBED_API_KEY": "env-embed-PLANTED",
        "MY_EMBED_KEY": "env-named-PLANTED",
        "OLLAMA_USER": "u",
        "OLLAMA_PASSWORD": "env-ollama-pw-PLANTED",
        "GOLDEVAL_JUDGE_PASSWORD": "env-judge-pw-PLANTED",
        "OLLAMA_HOST": "http://x:host-pw-PLANTED@h:1",
        "GOLDEVAL_STORE": "postgresql://u:store-pw-PLANTED@db/goldeval",
        "GOLDEVAL_EMBED_URL": "http://e/?token=embed-url-PLANTED",
        "GOLDEVAL_API_KEYS": "service-key-PLANTED-1:EVAL,service-key-PLANTED-2:ADMIN",
        "HOME": "/home/someone-not-secret",
    }
    secrets = run_secrets(
        [],
        environ,
        urls=["sqlite:///x", None, "http://o/?sig=opt-url-PLANTED"],
        key_variables=["MY_EMBED_KEY"],
    )
    for name, value in environ.items():
        planted = re.findall(r"[\w-]*PLANTED[\w-]*", value)
        for secret in planted:
            assert _masks(secrets, secret.removesuffix(":EVAL").removesuffix(":ADMIN")), name
    assert _masks(secrets, base64.b64encode(b"u:env-ollama-pw-PLANTED").decode())
    assert _masks(secrets, "opt-url-PLANTED")
    assert not _masks(secrets, "/home/someone-not-secret") and not _masks(secrets, "EVAL")


def test_the_embeddings_variables_are_known() -> None:
    # core cannot import providers: the names are listed twice, kept equal here
    assert embeddings.ENV_API_KEY in KEY_VARIABLES
    assert embeddings.ENV_URL in URL_VARIABLES


@pytest.mark.parametrize(
    "kinds,chosen",
    [
        ([None, None], 0),
        (["SECRET_IN_ANSWER", None], None),
        ([None, "SECRET_IN_ANSWER"], None),
        (["TIMEOUT", None], 1),
    ],
)
def test_recordable_attempt(kinds: list[str | None], chosen: int | None) -> None:
    attempts = [{"errorKind": k} if k else {"output": f"answer {n}"} for n, k in enumerate(kinds)]
    got = recordable_attempt(attempts)
    assert got is (None if chosen is None else attempts[chosen])


@pytest.mark.parametrize(
    "encode",
    [
        lambda k: base64.b64encode(k.encode()).decode(),
        lambda k: base64.b64encode(k.encode()).decode().rstrip("="),
        lambda k: base64.urlsafe_b64encode(k.encode()).decode(),
        lambda k: k.encode().hex(),
        lambda k: k.encode().hex().upper(),
        lambda k: "".join(f"\\u{ord(c):04x}" for c in k),
        lambda k: "".join(f"&#{ord(c)};" for c in k),
        lambda k: "".join(f"&#x{ord(c):x};" for c in k),
    ],
    ids=[
        "base64",
        "base64-unpadded",
        "base64-url",
        "hex",
        "HEX",
        "json-escapes",
        "html-dec",
        "html-hex",
    ],
)
def test_a_key_echoed_whole_in_another_encoding_is_masked(encode: object) -> None:
    """A proxy's error page or a debugging answer that echoes the key re-encoded: the
    encoded key reached run.json, the reports and the store (29 of 31 characters readable
    through escapes)."""
    masker = SecretMasker(run_secrets([], {"OPENAI_API_KEY": KEY}))
    shown = encode(KEY)  # type: ignore[operator]
    assert masker.mask(f"bad key <{shown}> here") == "bad key <***> here"
    # Percent-encoding in lower case (upper case was masked before, by quote()).
    lower_key = "p@ss/word:with-parts"
    lower = SecretMasker(run_secrets([], {"OPENAI_API_KEY": lower_key}))
    assert lower.mask("x=p%40ss%2fword%3awith-parts") == "x=***"


def test_a_secret_cut_by_an_excerpt_is_masked_at_its_cut_mark() -> None:
    masker = SecretMasker([KEY])
    shown = masker.mask_message
    # its start before the mark (an excerpt cut it), its end after one (an excerpt of a tail)
    assert shown(f"args: '{{xxx{KEY[:20]}\u2026'") == "args: '{xxx***\u2026'"
    assert shown(f"\u2026{KEY[-9:]} rest") == "\u2026*** rest"
    assert shown(f"{KEY[:12]}\u2026{KEY[-12:]}") == "***\u2026***"
    # pytest's assertion message cuts with three dots
    assert shown(f"assert '{KEY[:12]}...bbbb' == 'x'") == "assert '***...bbbb' == 'x'"
    assert shown(f"'aaaa...{KEY[-10:]}'") == "'aaaa...***'"
    assert masker.found(f"x{KEY[:6]}\u2026")
    # three characters say less than a key's public prefix; text without a mark is untouched
    assert shown(f"{KEY[:3]}\u2026") == f"{KEY[:3]}\u2026"
    assert shown(f"{KEY[:12]} and more") == f"{KEY[:12]} and more"
    assert shown("ordinary text\u2026 cut") == "ordinary text\u2026 cut"


def test_an_answer_is_masked_for_whole_secrets_only() -> None:
    """An answer is what the graders read: its own ellipsis beside four characters of a key's
    start or end (``…5678``, ``sk-p…``) is not a leak, and was masked before the graders."""
    key = "sk-proj-abcdefgh12345678"
    masker = SecretMasker([key])
    answer = "Your order \u20265678 shipped; keys look like sk-p\u2026 (shortened)"
    assert masker.mask(answer) == answer
    assert masker.mask(f"my key {key}") == "my key ***"


def test_cut_masking_of_a_long_secret_is_linear() -> None:
    """A regex of a key's prefixes nests as deep as the key is long (RecursionError at 2,000
    characters); the scan is driven by four-character pieces instead."""
    long_key = "k" * 50 + "x" * 2000
    masker = SecretMasker([long_key, KEY])
    assert masker.mask_message(long_key[:300] + "\u2026") == "***\u2026"
    text = f"{KEY[:9]}\u2026" * 50_000
    assert masker.mask_message(text) == "***\u2026" * 50_000


SLASHED = "sk-Ab/Cd+Ef=Gh/IjKlMnOpQr+St=="


@pytest.mark.parametrize(
    "shown",
    [
        "sk-Ab\\u002FCd\\u002BEf=Gh/IjKlMnOpQr+St==",  # .NET's JSON: only + and / escaped
        "sk-Ab&#47;Cd&#43;Ef=Gh/IjKlMnOpQr+St==",  # Go's html/template
        "sk-Ab&#x2f;Cd&#X2B;Ef&#61;Gh/IjKlMnOpQr+St==",
        "sk-Ab&sol;Cd&plus;Ef&equals;Gh/IjKlMnOpQr+St==",
        "sk-Ab%2FCd+Ef=Gh%2FIjKlMnOpQr+St==",  # only the / percent-encoded
        "sk-Ab%2fCd%2BEf=Gh/IjKlMnOpQr+St%3d%3D",  # hex in mixed case
        "sk-Ab\\/Cd\\+Ef=Gh/IjKlMnOpQr+St==",  # JSON's \/ and Markdown's \+
        "sk-Ab\u200b/Cd+Ef=Gh/IjKl\u200dMnOpQr+St\ufeff==",  # invisible characters inside
    ],
)
def test_a_key_quoted_back_in_part_is_masked(shown: str) -> None:
    """A re-probe: each of these passed whole into every artifact (only whole spellings of
    the key were known)."""
    forms = secret_forms(None, None, SLASHED)
    assert SecretMasker(run_secrets([], {"OPENAI_API_KEY": SLASHED})).mask(f"a {shown} b") == (
        "a *** b"
    )
    # the HTTP clients' masking of error bodies and messages (goldeval.core.settings)
    assert mask_secrets(f"error: {shown}.", forms) == "error: ***."


def test_text_near_a_key_but_not_it_is_left_alone() -> None:
    masker = SecretMasker(run_secrets([], {"OPENAI_API_KEY": SLASHED}))
    for text in (
        "sk-Ab/Cd+Ef=Gh/IjKlMnOpQr+St",  # shorter than the key: its end is missing
        "IjKlMnOpQr is a run of letters",
        "ordinary text with & and %2F and \\u002B in it",
    ):
        assert masker.mask(text) == text

"""LexicalRetriever: tokenisation, stemming, layer bans, scoring and selection (section 3)."""

from __future__ import annotations

from pathlib import Path

from goldeval.dataset.domain import RetrieverConfig
from goldeval.dataset.pack import Chunk, parse_chunk
from goldeval.pipeline.retriever import LexicalRetriever, Tokenizer


def chunk(cid: str, tags=(), related=(), index=(), heading="") -> Chunk:
    return Chunk(cid, tuple(tags), tuple(related), tuple(index), heading, "", Path(cid))


def test_stemming_examples() -> None:
    tok = Tokenizer(RetrieverConfig())
    assert tok.stem("успешный") == tok.stem("успешного") == "успешн"
    assert tok.stem("пароль") == tok.stem("паролем") == "парол"
    assert tok.stem("ого") == "ого"  # a suffix may not leave fewer than 4 characters


def test_tokens_drop_stop_words_short_tokens_and_keep_at() -> None:
    tok = Tokenizer(RetrieverConfig())
    assert tok.tokens("Добавь автотест на @Layer и x") == {"@layer"}
    assert tok.tokens("login_page") == {"login", "page"}


def test_layer_ban_penalises_chunks_and_selection_skips_them() -> None:
    chunks = [
        chunk(
            "form-negative",
            tags=["negative", "e2e"],
            index=["логин", "пароль"],
            related=["po-steps"],
        ),
        chunk("api-negative", tags=["api", "negative"], index=["логин"]),
        chunk("layer-rules", tags=["layers"], index=["api"]),
        chunk("po-steps", tags=["steps"]),
    ]
    r = LexicalRetriever(chunks)
    query = "Покрой API логин с неверным паролем. Не e2e, не клики."
    assert r.banned_layers(query) == {"e2e"}
    ranking = {s.chunk.id: (s.score, s.penalised) for s in r.rank(query)}
    assert ranking["form-negative"][1] is True and ranking["form-negative"][0] < 0
    assert r.retrieve(query)[0] == "api-negative"
    assert "form-negative" not in r.retrieve(query)
    # without the ban the e2e chunk wins (tag negative 5 + index логин, пароль 8 = 13)
    assert r.retrieve("логин с неверным паролем negative")[0] == "form-negative"


def test_ban_needs_word_boundaries() -> None:
    r = LexicalRetriever([chunk("a")])
    assert r.banned_layers("дане api") == set()
    assert r.banned_layers("НЕ   UI") == {"ui"}
    assert r.banned_layers("не api2") == set()


def test_seed_related_then_ranking_min_two_max_four() -> None:
    chunks = [
        chunk("seed", tags=["alpha"], related=["r1", "r2", "r3", "r4", "missing"]),
        chunk("r1"),
        chunk("r2"),
        chunk("r3"),
        chunk("r4"),
        chunk("other", tags=["beta"]),
    ]
    r = LexicalRetriever(chunks)
    assert r.retrieve("alpha") == ["seed", "r1", "r2", "r3"]
    lone = LexicalRetriever([chunk("a", tags=["alpha"]), chunk("b"), chunk("c")])
    assert lone.retrieve("alpha") == ["a", "b"]  # ties by id after the seed
    assert LexicalRetriever([]).retrieve("x") == []


def test_scoring_weights() -> None:
    c = chunk("login-form", tags=["form"], index=["пароль"], heading="Login form page")
    r = LexicalRetriever([c])
    (scored,) = r.rank("login form пароль page")
    # id: login, form (8·2); tags: form (5); index: парол (4); heading: login, form, page (2·3)
    assert scored.score == 16 + 5 + 4 + 6


def test_chunk_front_matter_parsing(tmp_path: Path) -> None:
    text = "---\nid: po-x\ntags: ['a', \"b\", ]\nrelated: [c]\nindex: [d e, f]\n---\n# Head\nbody"
    c = parse_chunk(tmp_path / "po-x.md", text)
    assert (c.id, c.tags, c.related, c.index, c.heading) == (
        "po-x",
        ("a", "b"),
        ("c",),
        ("d e", "f"),
        "Head",
    )

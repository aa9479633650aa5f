"""LexicalRetriever (reference section 3): a deterministic keyword retriever over the pack.

It scores only a chunk's id, tags, index words and heading, so the retrieval oracle of each row
(``expect.rag``) is reproducible without embeddings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from goldeval.dataset.domain import RetrieverConfig
from goldeval.dataset.pack import Chunk

# [\p{L}\p{N}@]+ : Python's [^\W_] is exactly "letter or digit" (str.isalnum) in Unicode mode.
_TOKEN = re.compile(r"(?:[^\W_]|@)+")
_ASCII_SPACE = "[ \\t\\n\\x0b\\f\\r]"


@dataclass(frozen=True)
class ScoredChunk:
    chunk: Chunk
    score: int
    penalised: bool


class Tokenizer:
    def __init__(self, config: RetrieverConfig) -> None:
        self.config = config
        self.stop_words = frozenset(config.stop_words)
        self.suffixes = config.suffixes
        self._stem = lru_cache(maxsize=65536)(self._stem_uncached)

    def _stem_uncached(self, token: str) -> str:
        cfg = self.config
        if token.endswith(cfg.soft_sign) and len(token) > cfg.min_stem_length:
            token = token[: -len(cfg.soft_sign)]
        for suffix in self.suffixes:
            if token.endswith(suffix) and len(token) - len(suffix) >= cfg.min_stem_length:
                return token[: -len(suffix)]
        return token

    def stem(self, token: str) -> str:
        return self._stem(token)

    def tokens(self, text: str) -> frozenset[str]:
        out = set()
        for raw in _TOKEN.findall(text.lower()):
            if raw in self.stop_words or len(raw) < self.config.min_token_length:
                continue
            out.add(self._stem(raw))
        return frozenset(out)


class LexicalRetriever:
    def __init__(self, chunks: Iterable[Chunk], config: RetrieverConfig | None = None) -> None:
        self.config = config or RetrieverConfig()
        self.tokenizer = Tokenizer(self.config)
        self.chunks = list(chunks)
        tok = self.tokenizer.tokens
        self._fields = [
            (
                c,
                tok(c.id.replace("-", " ")),
                tok(" ".join(c.tags)),
                tok(" ".join(c.index)),
                tok(c.heading),
                tok(c.id.replace("-", " ") + " " + " ".join(c.tags) + " " + " ".join(c.index)),
            )
            for c in self.chunks
        ]
        bans = "|".join(re.escape(w) for w in self.config.layer_ban_words)
        layers = "|".join(re.escape(layer) for layer in self.config.layers)
        self._ban = re.compile(
            rf"(?<![^\W_])(?:{bans}){_ASCII_SPACE}+({layers})(?![^\W_])", re.IGNORECASE
        )
        self._ids = {c.id for c in self.chunks}
        self._by_id = {c.id: c for c in self.chunks}

    def banned_layers(self, query: str) -> set[str]:
        return {m.group(1).lower() for m in self._ban.finditer(query)}

    def rank(self, query: str) -> list[ScoredChunk]:
        cfg = self.config
        q = self.tokenizer.tokens(query)
        banned = {self.tokenizer.stem(layer) for layer in self.banned_layers(query)}
        scored = []
        for chunk, t_id, t_tags, t_index, t_heading, bag in self._fields:
            score = (
                cfg.weight_id * len(q & t_id)
                + cfg.weight_tags * len(q & t_tags)
                + cfg.weight_index * len(q & t_index)
                + cfg.weight_heading * len(q & t_heading)
            )
            penalised = bool(banned) and bool(banned & bag)
            if penalised:
                score -= cfg.layer_penalty
            scored.append(ScoredChunk(chunk, score, penalised))
        scored.sort(key=lambda s: (-s.score, s.chunk.id))
        return scored

    def retrieve(self, query: str) -> list[str]:
        """Chunk ids for ``query``: the seed, its related chunks, then the ranking (3.5)."""
        if not self.chunks:
            return []
        cfg = self.config
        ranking = self.rank(query)
        seed = ranking[0].chunk
        picked = [seed.id]
        for rel in seed.related:
            if len(picked) >= cfg.max_chunks:
                break
            if rel in self._ids and rel not in picked:
                picked.append(rel)
        for scored in ranking:
            if len(picked) >= cfg.min_chunks:
                break
            if scored.penalised or scored.chunk.id in picked:
                continue
            picked.append(scored.chunk.id)
        return picked[: cfg.max_chunks]

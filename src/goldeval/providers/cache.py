"""Response cache (``--golden-cache=DIR``): a rerun after a crash costs nothing.

The key covers provider, model, parameters, messages and the attempt number, so repeated
attempts of one case stay distinct answers instead of one cached answer counted N times.

An answer that holds a secret the run knows (goldeval.core.secrets) is not cached: the cache
folder is a file on disk like any artifact, and storing it masked would let a record-mode rerun
write ``***`` into a fixture instead of refusing the row.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from goldeval.core.errors import GoldevalError
from goldeval.core.limits import loads_json
from goldeval.core.safe_files import read_regular_file
from goldeval.core.secrets import SecretMasker
from goldeval.providers.base import (
    Answer,
    Provider,
    ProviderRequest,
    ToolCall,
    masked_answer,
    resolve,
)


class CachedProvider(Provider):
    def __init__(
        self,
        inner: Provider,
        folder: Path,
        params: dict[str, Any],
        masker: SecretMasker | None = None,
    ) -> None:
        self.inner = inner
        self.masker = masker or SecretMasker()
        self.folder = folder
        self.params = params
        self.name = inner.name
        self.thread_safe = inner.thread_safe
        self.hits = 0

    def key(self, request: ProviderRequest) -> str:
        material = {
            "provider": self.inner.name,
            "model": request.model,
            "params": self.params,
            "system": request.system,
            "user": request.user,
            "attempt": request.attempt,
            "tools": request.options.get("tools"),
        }
        # Other request options and a conversation's turns change the answer too; they enter
        # only when set, so cache entries written before they existed keep their keys.
        others = {k: v for k, v in request.options.items() if k != "tools"}
        if others:
            material["options"] = others
        if request.messages is not None:
            material["messages"] = request.messages
        text = json.dumps(material, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def complete(self, request: ProviderRequest) -> Answer:
        path = self.folder / f"{self.key(request)}.json"
        try:
            # A cache file is ours, but a damaged or planted one must not crash the run: a
            # bounded read and a depth-bounded parse, anything wrong is a miss.
            data = loads_json(read_regular_file(path).decode("utf-8"), what="a cache entry")
        except (OSError, ValueError, GoldevalError):
            data = None
        if isinstance(data, dict) and "text" in data:
            self.hits += 1
            return Answer(
                text=data["text"],
                tool_calls=[
                    ToolCall(t["name"], t.get("arguments") or {})
                    for t in data.get("toolCalls") or []
                ],
                input_tokens=data.get("inputTokens"),
                output_tokens=data.get("outputTokens"),
                cost=data.get("cost"),
                duration_ms=int(data.get("durationMs") or 1),
                tries=0,
                model=data.get("model"),
                finish_reason=data.get("finishReason"),
            )
        answer: Answer = resolve(self.inner.complete(request))
        if masked_answer(answer, self.masker) is not answer:
            return answer  # never on disk; the pipeline masks it (or refuses it when recording)
        record = {
            "text": answer.text,
            "toolCalls": [t.dump() for t in answer.tool_calls],
            "inputTokens": answer.input_tokens,
            "outputTokens": answer.output_tokens,
            "cost": answer.cost,
            "durationMs": answer.duration_ms,
            "model": answer.model,
            "finishReason": answer.finish_reason,
        }
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(record, fh, ensure_ascii=False)
        os.replace(tmp, path)
        return answer

    def close(self) -> None:
        self.inner.close()

"""RFC 9457 problem details (``application/problem+json``) for every error the API returns."""

from __future__ import annotations

from typing import Any

MEDIA_TYPE = "application/problem+json"


class Problem(Exception):
    """An error response: ``raise Problem(404, "run-not-found", "Run not found", detail)``.

    ``kind`` becomes the problem ``type`` (``/problems/<kind>``, a URI reference resolved
    against the server, documented in docs/service.md); ``extra`` members are added as they are.
    """

    def __init__(
        self,
        status: int,
        kind: str,
        title: str,
        detail: str | None = None,
        *,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail or title)
        self.status = status
        self.kind = kind
        self.title = title
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra

    def body(self, instance: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"type": f"/problems/{self.kind}", "title": self.title}
        out["status"] = self.status
        if self.detail:
            out["detail"] = self.detail
        if instance:
            out["instance"] = instance
        out.update(self.extra)
        return out


def validation_problem(errors: list[dict[str, str]], detail: str | None = None) -> Problem:
    """422 with one ``{"field", "message"}`` per problem; nothing was queued."""
    text = detail or "; ".join(
        f"{e['field']}: {e['message']}" if e.get("field") else e["message"] for e in errors
    )
    return Problem(422, "validation", "Invalid request", text, errors=errors)

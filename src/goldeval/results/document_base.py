"""The base of the run document's typed models (goldeval.results.documents): strict, open
JSON objects, and the interval they share with the variant comparison's models."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Doc", "IntervalDoc"]


class Doc(BaseModel):
    """A JSON object of the run document: strict types, unknown keys kept."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)

    def dump(self) -> dict[str, Any]:
        """The JSON object again (the names and only the keys it was built with)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def as_written(self, field: str, absent: Any = None) -> Any:
        """The field as the JSON wrote it (an explicit null included), ``absent`` when the
        JSON left the key out (a report shows "0 ms" for a missing duration, "None" for null)."""
        return getattr(self, field) if field in self.model_fields_set else absent


class IntervalDoc(Doc):
    """A two-sided 95% interval and its method (``wilson``, ``bootstrap-percentile`` or
    ``normal``)."""

    lower: float
    upper: float
    method: str


class PassAtKRowDoc(Doc):
    """pass@k and pass^k for one k, over the ``cases`` with at least k graded attempts."""

    k: int
    cases: int
    pass_at_k: float = Field(alias="passAtK")
    pass_at_k_ci95: IntervalDoc | None = Field(default=None, alias="passAtKCi95")
    pass_hat_k: float = Field(alias="passHatK")
    pass_hat_k_ci95: IntervalDoc | None = Field(default=None, alias="passHatKCi95")

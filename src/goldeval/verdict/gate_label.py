"""The gate verdict as every surface shows it (the site, the HTML summary and run page, both
JUnit writers): the gate's own word only when the run's exit decision agrees with it.

A gate weighs the graded attempts; the run's exit decision weighs the whole run. A run with
ERROR attempts can pass its quality rules and still exit 75 (not a quality verdict, retry
it), and a comparison that was invalid exits 65 whatever the rules said. Shown as a bare
``PASS`` such a run read as a pass: a green badge on the site, ``golden.verdict=PASS`` for a
dashboard. So PASS is shown only for a run that exits 0.
"""

from __future__ import annotations

from goldeval.results.documents import RunDocument
from goldeval.verdict.exit_codes import COMPARISON_INVALID

#: A run whose baseline comparison was invalid (exit 65): its gate says nothing either way.
NOT_COMPARABLE = "not comparable"
#: A run without a gate.
NOT_APPLIED = "not applied"


def gate_label(run: RunDocument) -> str:
    """The word every surface shows for ``run``'s gate."""
    decision = run.exit_decision
    code = decision.code if decision is not None else None
    if code == COMPARISON_INVALID:
        return NOT_COMPARABLE
    gate = run.quality_gate
    if gate is None:
        return NOT_APPLIED
    if gate.verdict == "PASS" and code not in (None, 0):
        return f"PASS, but the run exits {code}"
    if gate.verdict == "PASS" and run.status not in (None, "COMPLETED"):
        # a document that says it did not end whole (edited, or a store row left RUNNING)
        return f"PASS, but the run is {run.status}"
    return gate.verdict

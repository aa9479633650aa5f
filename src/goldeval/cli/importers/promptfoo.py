"""promptfoo test files (YAML) as golden rows: tests, vars, one prompt template, assertions.

The YAML is read by :class:`~goldeval.core.bounded_yaml.BoundedYamlLoader` (an alias bomb
is refused while it is composed) and each test becomes plain JSON data (dates as ISO text)
before it is mapped.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from goldeval.cli.importers.bounded import json_data, read_text
from goldeval.cli.importers.mapping import PROMPT_NAMES, first_of, slug, text_of
from goldeval.cli.importers.model import ImportReport, Row, import_error
from goldeval.core import limits
from goldeval.core.bounded_yaml import load_yaml

# promptfoo assertion type -> how it becomes expect keys
_PF_SIMPLE = {
    "contains": "contains",
    "icontains": "contains",
    "contains-any": "contains_any",
    "icontains-any": "contains_any",
    "contains-all": "contains",
    "icontains-all": "contains",
    "equals": "equals",
    "regex": "regex",
    "not-regex": "not_regex",
    "contains-json": "json_schema",
    "is-json": "json_schema",
    "similar": "similar_to",
}


def _yaml_items(text: str, path: Path) -> tuple[Any, list[int]]:
    """The document and the line of each test (when the tests are a list in this file).

    Composed once by the bounded loader (aliases, nesting and expanded size counted)."""
    try:
        node, data = load_yaml(text, path)
    except ValueError as exc:  # a constructor's own error, e.g. an int of 5000 digits
        raise import_error(str(path), None, f"not valid YAML ({exc})", "fix the value") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise import_error(
            f"{path}{line}",
            None,
            f"not valid YAML ({getattr(exc, 'problem', None) or exc})",
            "fix the YAML syntax",
        ) from None
    lines: list[int] = []
    seq = node
    if isinstance(node, yaml.MappingNode):
        seq = next((v for k, v in node.value if getattr(k, "value", None) == "tests"), None)
    if isinstance(seq, yaml.SequenceNode):
        lines = [item.start_mark.line + 1 for item in seq.value]
    return data, lines


def _render(template: str, variables: dict[str, Any], where: str) -> str:
    """``{{ var }}`` replaced by the test's vars, within ``template_output_chars`` (the limit of
    a manifest's template render): 20,000 references to a 100 KB var made a 2 GB prompt (a
    MemoryError traceback, gigabytes of memory) from a 200 KB file."""
    most = int(limits.default("template_output_chars"))
    made = len(template)

    def sub(m: re.Match[str]) -> str:
        nonlocal made
        name = m.group(1)
        value = str(variables[name]) if name in variables else m.group(0)
        made += len(value) - len(m.group(0))
        if made > most:
            raise import_error(
                where,
                "prompt",
                f"the prompt template renders past {most:,} characters over this test's vars "
                "(the template_output_chars limit)",
                "shorten the template or the vars it repeats",
            )
        return value

    return re.sub(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", sub, template)


def read_promptfoo(path: Path, report: ImportReport) -> list[Row]:
    data, lines = _yaml_items(read_text(path), path)
    template = None
    tests = data
    if isinstance(data, dict):
        tests = data.get("tests")
        template = _template(data, report)
    if not isinstance(tests, list):
        raise import_error(
            str(path),
            "tests",
            "no list of tests",
            "a promptfoo test file is a YAML list of tests, or a config with `tests:`",
        )
    rows = []
    # What the rows hold in all may not pass what one input file may hold (file_bytes): the
    # import would write it as one rows file, refused only after it was built.
    most, made = int(limits.default("file_bytes")), 0
    for n, test in enumerate(tests):
        where = f"{path}:{lines[n]}" if n < len(lines) else f"{path} test {n + 1}"
        row = _test_row(test, where, template, report)
        made += len(row.prompt or "")
        if made > most:
            raise import_error(
                where,
                "prompt",
                f"the rendered prompts pass {most:,} characters in all (the file_bytes limit "
                "of the rows file they would make)",
                "split the tests into several files, or shorten the template",
            )
        rows.append(row)
    return rows


def _template(config: dict[str, Any], report: ImportReport) -> str | None:
    """A promptfooconfig's one prompt template (None: each row's prompt is in its vars)."""
    template = None
    prompts = config.get("prompts")
    if isinstance(prompts, list) and len(prompts) == 1 and isinstance(prompts[0], str):
        template = prompts[0]
    elif isinstance(prompts, str):
        template = prompts
    elif prompts:
        report.notes.append(
            "several prompts in the config: each row takes its prompt "
            "from its vars (prompt/question/input/query)"
        )
    default = config.get("defaultTest")
    if default:
        report.dropped["defaultTest (apply it to the rows by hand)"] += 1
    return template


def _test_row(test: Any, where: str, template: str | None, report: ImportReport) -> Row:
    """One promptfoo test as a row: its prompt, id, and the assertions goldeval grades."""
    report.admit(where)
    if not isinstance(test, dict):
        raise import_error(where, None, "a test must be a mapping", "write `- vars: {...}`")
    test = json_data(test, where=where, field="")  # dates as ISO text, NaN as null
    variables = test.get("vars") or {}
    if not isinstance(variables, dict):
        raise import_error(
            where,
            "vars",
            "must be a mapping of names to values",
            "write `vars: {question: ...}`",
        )
    row = Row(where=where)
    _prompt(row, variables, template, report)
    if test.get("description"):
        row.id = slug(str(test["description"]))
        row.metadata["description"] = test["description"]
        report.mapped["description -> id, metadata.description"] += 1
    for k in ("options", "metadata", "threshold", "provider"):
        if k in test:
            report.dropped[f"{k} (no golden equivalent)"] += 1
    asserts = test.get("assert") or []
    if not isinstance(asserts, list):
        raise import_error(
            where,
            "assert",
            "must be a list of assertions",
            "write `assert: [{type: contains, value: ...}]`",
        )
    for m, assertion in enumerate(asserts):
        _pf_assert(row, assertion, f"assert[{m}]", report)
    if not row.expect:
        raise import_error(
            where,
            "assert",
            "no assertion that goldeval can grade",
            "add a contains/equals/regex/is-json assertion, or write expect by hand",
        )
    return row


def _prompt(
    row: Row, variables: dict[str, Any], template: str | None, report: ImportReport
) -> None:
    """The row's prompt: the template rendered over the vars, else the var that names one."""
    where = row.where
    if template is not None:
        row.prompt = _render(template, variables, where)
        missing = re.findall(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", row.prompt)
        if missing:
            raise import_error(
                where,
                f"vars.{missing[0]}",
                "the prompt uses it but the test has no such var",
                f"add `{missing[0]}` to the test's vars",
            )
        report.mapped["prompts[0] + vars -> prompt (rendered)"] += 1
        row.metadata["vars"] = variables
        return
    key = first_of(variables, PROMPT_NAMES)
    if key is None:
        raise import_error(
            where,
            "vars",
            f"no prompt: none of {', '.join(PROMPT_NAMES)} is set "
            "and the file has no single prompt template",
            "add `prompt:` to vars, or import the promptfooconfig with `prompts:`",
        )
    row.prompt = text_of(variables[key])
    report.mapped[f"vars.{key} -> prompt"] += 1
    rest = {k: v for k, v in variables.items() if k != key}
    if rest:
        row.metadata["vars"] = rest
        report.mapped["other vars -> metadata.vars"] += 1


def _pf_assert(row: Row, assertion: Any, fld: str, report: ImportReport) -> None:
    if not isinstance(assertion, dict) or not isinstance(assertion.get("type"), str):
        raise import_error(
            row.where, fld, "an assertion needs a `type`", "write `- type: contains`"
        )
    kind = assertion["type"]
    value = assertion.get("value")
    negate = kind.startswith("not-") and kind not in ("not-regex",)
    base = kind[4:] if negate else kind
    target = _PF_SIMPLE.get(base)
    if negate and base in ("contains", "icontains"):
        row.expect.setdefault("not_regex", [])
        if not isinstance(row.expect["not_regex"], list):
            row.expect["not_regex"] = [row.expect["not_regex"]]
        row.expect["not_regex"].append(
            ("(?i)" if base == "icontains" else "") + re.escape(str(value))
        )
        report.mapped[f"assert {kind} -> expect.not_regex"] += 1
        return
    if target is None or negate:
        report.dropped[
            f"assert {kind} (no goldeval grader; grade it by hand or with a grader of your own)"
        ] += 1
        return
    if target == "contains":
        # every substring must occur: one escaped pattern each (regex: each must match)
        items = value if isinstance(value, list) else [value]
        row.expect.setdefault("regex", [])
        if not isinstance(row.expect["regex"], list):
            row.expect["regex"] = [row.expect["regex"]]
        flag = "(?i)" if base.startswith("i") else ""
        row.expect["regex"] += [flag + re.escape(str(v)) for v in items]
        how = " (case-insensitive)" if flag else ""
        report.mapped[f"assert {kind} -> expect.regex{how}"] += 1
        return
    elif target == "contains_any":
        items = value if isinstance(value, list) else [value]
        if base.startswith("i"):
            row.expect["regex"] = "(?i)" + "|".join(re.escape(str(v)) for v in items)
            report.mapped[f"assert {kind} -> expect.regex (case-insensitive)"] += 1
            return
        row.expect["contains_any"] = [str(v) for v in items]
    elif target == "json_schema":
        row.expect["json_schema"] = value if isinstance(value, dict) else {}
    elif target == "similar_to":
        row.expect["similar_to"] = str(value)
        if assertion.get("threshold") is not None:
            row.expect["similarity_threshold"] = assertion["threshold"]
    elif target == "equals" and not isinstance(value, str):
        row.expect["json_equals"] = value
        target = "json_equals"
    else:
        row.expect[target] = value
    report.mapped[f"assert {kind} -> expect.{target}"] += 1

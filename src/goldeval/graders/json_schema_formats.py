"""The ``format`` values the ``json_schema`` grader asserts (:mod:`.json_schema_check`).

A fixed set that needs no optional package, so a verdict does not depend on what else is
installed: ``date-time`` (RFC 3339, with a time zone), ``date``, ``email``
(something@something), ``ipv4``, ``ipv6``, ``uuid`` (hyphenated) and ``regex``. Any other
format is an annotation, as in the specification's default. A value that is not a string
passes (``format`` constrains strings only).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re

from jsonschema import FormatChecker

from goldeval.graders.budget import pattern_error

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}\Z", re.ASCII)
_DATE_TIME = re.compile(
    r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z", re.ASCII
)
_UUID = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\Z")

FORMATS = FormatChecker(formats=())


@FORMATS.checks("date", raises=ValueError)
def _is_date(value: object) -> bool:
    if not isinstance(value, str):
        return True
    return bool(_DATE.match(value)) and bool(dt.date.fromisoformat(value))


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    match = _DATE_TIME.match(value)
    if match is None:
        return False
    date, time, _fraction, zone = match.groups()
    zone = "+00:00" if zone in ("Z", "z") else zone
    dt.datetime.fromisoformat(f"{date}T{time}{zone}")  # range checks (month 13, hour 25)
    return True


@FORMATS.checks("email")
def _is_email(value: object) -> bool:
    if not isinstance(value, str):
        return True
    local, at, domain = value.rpartition("@")
    return bool(at and local and domain) and not any(c.isspace() for c in value)


@FORMATS.checks("ipv4", raises=ValueError)
def _is_ipv4(value: object) -> bool:
    return not isinstance(value, str) or bool(ipaddress.IPv4Address(value))


@FORMATS.checks("ipv6", raises=ValueError)
def _is_ipv6(value: object) -> bool:
    return not isinstance(value, str) or bool(ipaddress.IPv6Address(value))


@FORMATS.checks("uuid")
def _is_uuid(value: object) -> bool:
    return not isinstance(value, str) or bool(_UUID.match(value))


@FORMATS.checks("regex")
def _is_regex(value: object) -> bool:
    return not isinstance(value, str) or pattern_error(value) is None


#: The formats asserted (see the module docstring); any other format is an annotation.
CHECKED_FORMATS = tuple(sorted(FORMATS.checkers))

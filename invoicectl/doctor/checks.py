"""One check of ``invoicectl doctor`` as plain data, and what a set of them comes to.

A check passes (``ok``), passes with something worth knowing (``warn``), fails (``fail``,
with the exit code its failure means), or was not made because an earlier one failed
(``skipped``). Messages are one line and hold no secret: the key appears only as its
fingerprint, and everything a server said is redacted before it reaches a check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from invoicectl.errors import ExitCode, worst

# The checks in the order they are made and shown, and the keys of each one's details in
# ``--json``: every key is always there (null when a check could not tell), so a script can
# rely on them (README, "invoicectl doctor").
DETAIL_KEYS = {
    "config": ("config_file", "config_file_found", "sources", "values"),
    "api_key": ("source", "fingerprint"),
    "base_url": ("url", "http_status", "duration_seconds", "version", "environment", "status"),
    "credentials": ("fingerprint", "http_status"),
    "journal": (
        "path", "exists", "size_bytes", "wal_bytes", "writable", "quick_check",
        "bound_base_url", "schema",
    ),
    "lock": ("path", "held", "pid", "host", "started_at", "command"),
    "clock": ("offset_seconds", "margin_seconds"),
    "disk": ("path", "free_bytes", "total_bytes"),
}  # fmt: skip
NAMES = tuple(DETAIL_KEYS)
_LABELS = {"api_key": "api key", "base_url": "base url"}


class Status(StrEnum):
    ok = "ok"
    warn = "warn"
    fail = "fail"
    skipped = "skipped"


@dataclass(frozen=True)
class Check:
    name: str  # one of NAMES
    status: Status
    message: str  # one line, for a person
    details: Mapping[str, Any] = field(default_factory=dict)  # stable keys, per check
    exit_code: ExitCode = ExitCode.OK  # what a failure of this check means

    def line(self) -> str:
        label = _LABELS.get(self.name, self.name)
        return f"{self.status.value:<7} {label:<12} {self.message}"

    def hidden(self, hide: Callable[[str], str]) -> Check:
        """This check with ``hide`` (``known_keys.key_hider``) applied to its message and to
        every text in its details: a key pasted into a setting doctor shows stays hidden."""
        details = {name: _hidden(value, hide) for name, value in self.details.items()}
        return replace(self, message=hide(self.message), details=details)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status.value,
            "message": self.message,
            "details": {key: self.details.get(key) for key in DETAIL_KEYS[self.name]},
        }


def _hidden(value: Any, hide: Callable[[str], str]) -> Any:
    """``value`` (a detail: text, number, list or mapping of them) with ``hide`` applied to
    every text in it."""
    if isinstance(value, str):
        return hide(value)
    if isinstance(value, Mapping):
        return {hide(str(name)): _hidden(item, hide) for name, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_hidden(item, hide) for item in value]
    return value


def ok(name: str, message: str, **details: Any) -> Check:
    return Check(name, Status.ok, message, details)


def warn(name: str, message: str, **details: Any) -> Check:
    return Check(name, Status.warn, message, details)


def fail(
    name: str, message: str, *, code: ExitCode = ExitCode.COULD_NOT_RUN, **details: Any
) -> Check:
    return Check(name, Status.fail, message, details, code)


def skipped(name: str, because: str) -> Check:
    return Check(name, Status.skipped, f"not checked: {because}")


@dataclass(frozen=True)
class Diagnosis:
    checks: Sequence[Check]

    @property
    def passed(self) -> bool:
        return all(check.status in (Status.ok, Status.warn) for check in self.checks)

    @property
    def exit_code(self) -> ExitCode:
        """0 only when every check passed; else the worst of the failures' codes (1 when a
        check could not be made for a reason that has no code of its own)."""
        if self.passed:
            return ExitCode.OK
        failed = [check.exit_code for check in self.checks if check.status is Status.fail]
        return worst(*failed) if any(failed) else ExitCode.COULD_NOT_RUN

    def summary(self) -> str:
        total = len(self.checks)
        if self.passed:
            warned = [check.name for check in self.checks if check.status is Status.warn]
            notes = f" ({len(warned)} with a warning: {', '.join(warned)})" if warned else ""
            return f"all {total} checks passed{notes}"
        failed = [check.name for check in self.checks if check.status is Status.fail]
        not_made = sum(check.status is Status.skipped for check in self.checks)
        left = f", {not_made} not made" if not_made else ""
        return (
            f"{len(failed)} of {total} checks failed ({', '.join(failed)}){left}; "
            f"exit {int(self.exit_code)}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.passed,
            "exit_code": int(self.exit_code),
            "checks": [check.to_dict() for check in self.checks],
        }

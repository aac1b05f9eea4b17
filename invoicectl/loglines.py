"""The plain log a person reads the next morning: a timestamp on every line, or one JSON
object per line, and the run's last line, ``exit 3: 1 invalid, 2 rejected``.

``LineStream`` sits under ``sys.stdout`` and ``sys.stderr`` (``cli.app.main`` puts it there,
for each stream on its own: only one that is not a terminal, or any with ``--log-format
json``) and is the one place that writes the plain lines of a command:

- ``text``: every line starts with the UTC time of its first character, to the second,
  ``2026-12-01T17:20:03Z `` (ISO 8601; UTC because a cron log outlives daylight-saving
  changes and is read beside the journal's and the API's UTC times).
- ``json``: every line is one JSON object on the same stream, ``{"timestamp", "level",
  "event", "message", ...}``; ``event`` and its counts come from ``tag`` (``send.summary``,
  ``run.exit``...), ``line`` for any other line.

Data a script parses (``--json``, ``--format json|jsonl|csv``) is never wrapped: the CLI
leaves such a stdout as it is (``data_on_stdout``), so that one file descriptor never
carries a document and log lines mixed.

This module imports only the standard library: the renderers below the CLI call ``tag``.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from invoicectl.text import line_by_line

STAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z( |$)")


class LogFormat(StrEnum):
    text = "text"
    json = "json"


def _now() -> datetime:
    return datetime.now(UTC)


class LineStream:
    """A text stream that writes each line of what it is given as a log line: stamped
    (``text``) or as one JSON object (``json``) on the stream beneath."""

    def __init__(
        self,
        stream: Any,
        name: str,
        fmt: LogFormat,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.beneath = stream  # the stream written to (a ping's tee may sit between)
        self.name = name  # "stdout" or "stderr": where ``tag`` finds it
        self.fmt = fmt
        self._clock = clock
        self._line = ""  # json: the line so far
        self._started: str | None = None  # the stamp of the line being written
        self._tags: deque[dict[str, Any]] = deque()

    def write(self, text: str) -> int:
        for piece in re.split(r"(?<=\n)", text):
            if piece:
                self._piece(piece)
        return len(text)

    def _piece(self, piece: str) -> None:
        """A piece of one line, with its end of line or without."""
        if self._started is None:
            self._started = self._clock().strftime(STAMP_FORMAT)
            if self.fmt is LogFormat.text:
                self.beneath.write(self._started + ("" if piece == "\n" else " "))
        ended = piece.endswith("\n")
        if self.fmt is LogFormat.text:
            self.beneath.write(piece)
        else:
            self._line += piece.rstrip("\n")
            if ended:
                self._emit(self._line)
                self._line = ""
        if ended:
            self._started = None

    def _emit(self, line: str) -> None:
        if not line.strip() and not self._tags:
            return  # a blank line between tables says nothing to a log shipper
        fields = self._tags.popleft() if self._tags else {}
        record = {
            "timestamp": self._started,
            "level": fields.pop("level", None) or level_of(line, self.name),
            "event": fields.pop("event", "line"),
            "message": line,
            **fields,
        }
        self.beneath.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")

    def tag(self, fields: dict[str, Any]) -> None:
        if self.fmt is LogFormat.json:
            self._tags.append(fields)

    def close_line(self) -> None:
        """A line left unfinished (a prompt, the process's end) is written whole."""
        if self._started is not None:
            self.write("\n")

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.beneath.flush()

    def isatty(self) -> bool:
        # JSON lines on a terminal too: no progress bar or table drawn into them.
        return False if self.fmt is LogFormat.json else bool(self.beneath.isatty())

    def __getattr__(self, name: str) -> Any:  # fileno, encoding, buffer, ...
        return getattr(self.beneath, name)


def level_of(line: str, stream: str) -> str:
    """``error`` for ``invoicectl: error: ...``, ``warning`` for a warning or any other
    ``invoicectl:`` line on stderr (a stop, a refused ping), else ``info``."""
    if line.startswith("invoicectl: error:") or line.startswith("Error:"):
        return "error"
    if "warning:" in line[:30] or (stream == "stderr" and line.startswith("invoicectl:")):
        return "warning"
    return "info"


# The streams in place in this process, by name ("stdout", "stderr").
_streams: dict[str, LineStream] = {}


def install(stream: Any, name: str, fmt: LogFormat) -> LineStream:
    """``stream`` under a ``LineStream``, remembered for ``tag``; the caller puts it in place."""
    wrapped = LineStream(stream, name, fmt)
    _streams[name] = wrapped
    return wrapped


def uninstall() -> None:
    for wrapped in _streams.values():
        wrapped.close_line()
        wrapped.flush()
    _streams.clear()


def tag(event: str, *, stream: str = "stdout", level: str | None = None, **fields: Any) -> None:
    """The next line written to ``stream`` is the JSON log's ``event`` with these fields
    (counts, the run id); nothing in the text format, whose line says it all already."""
    wrapped = _streams.get(stream)
    if wrapped is not None:
        wrapped.tag({"event": event, "level": level, **fields})


def unstamped(line: str) -> str:
    """A line without its timestamp (for reading a log back)."""
    return STAMP.sub("", line, count=1)


# --- the run's last line --------------------------------------------------------------------

# What the command said of its exit code: (code, cause, fields for the JSON log's run.exit).
_outcome: tuple[int, str, dict[str, Any]] | None = None


def explain_exit(code: int, cause: str, **fields: Any) -> None:
    """The words the last line gives for ``code`` (``1 invalid, 2 rejected``), said by the
    command from the data it chose the code from; an error's message, for an error."""
    global _outcome
    _outcome = (int(code), cause, fields)


def exit_line(code: int, meaning: Callable[[int], str]) -> tuple[str, dict[str, Any]]:
    """``exit 3: <cause>`` and the fields of its ``run.exit`` event. A cause said for another
    code (a later error ended the run) is not used: ``meaning(code)`` stands in for it."""
    global _outcome
    said, _outcome = _outcome, None
    if said is not None and said[0] == code:
        cause, fields = said[1], said[2]
    else:
        cause, fields = meaning(code), {}
    level = "info" if code == 0 else ("warning" if code in (66, 75) else "error")
    line = f"exit {code}: {line_by_line(cause)}"  # what prints nothing, escaped
    return line, {"level": level, "exit_code": code, "cause": cause, **fields}

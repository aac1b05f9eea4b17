"""Health-check pings in the convention of healthchecks.io (and Cronitor, Dead Man's Snitch...).

A run with ``--ping-url URL`` (config ``ping_url``, or ``$INVOICECTL_PING_URL``) posts to
``URL/start`` as it starts and to ``URL/<exit code>`` (``/0``, ``/3``, ``/75``) as it ends, the
second with the tail of the run's plain output (``OutputTail``, the last ``TAIL_BYTES``) as its
body, so that the monitor shows why a run failed. A monitor that hears no end in time, or an
exit code other than 0, alerts.

The URL is a secret: whoever holds it can report the job healthy. It is never printed, logged,
stored in the journal or named in an error ("the ping URL" instead). A ping never fails the
run and never holds it up for long: at most ``TIMEOUT`` seconds in all (the request runs in a
thread that is left behind if it overruns), an answer read to at most ``MAX_ANSWER`` bytes,
and a failure is one line for stderr (``ping``'s return value).
"""

from __future__ import annotations

import re
import threading
from collections import deque

TIMEOUT = 5.0  # seconds for one ping, connection to answer, whatever the server does
TAIL_BYTES = 10_000  # of the run's output, sent with the last ping
MAX_ANSWER = 1024  # bytes of a ping's answer read; the rest is not waited for
# Terminal control: colours, cursor moves, hyperlinks; a progress bar's carriage returns.
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")


def ping(url: str, what: str, body: bytes = b"") -> str | None:
    """POST ``body`` to ``url/what``; None when the monitor answered 2xx, else the one line to
    say, which never holds the URL."""
    outcome: list[str | None] = []
    worker = threading.Thread(
        target=lambda: outcome.append(_post(_at(url, what), body)),
        name="invoicectl-ping",
        daemon=True,  # one that overruns is left behind; the process does not wait for it
    )
    worker.start()
    worker.join(TIMEOUT)
    if not outcome:
        return _line(what, f"no answer within {TIMEOUT:g} s")
    return None if outcome[0] is None else _line(what, outcome[0])


def _at(url: str, what: str) -> str:
    """``url`` with ``/what`` at the end of its path, ahead of its query string."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"{parts.path}/{what}"))


def _post(url: str, body: bytes) -> str | None:
    """Why the POST failed, in words that name no URL; None when answered 2xx."""
    import httpx

    try:
        with (
            httpx.Client(timeout=TIMEOUT, follow_redirects=False) as client,
            client.stream("POST", url, content=body) as answer,
        ):
            read = 0
            for chunk in answer.iter_raw():
                read += len(chunk)
                if read >= MAX_ANSWER:
                    break
            if not 200 <= answer.status_code < 300:
                return f"it answered HTTP {answer.status_code}"
    except httpx.TimeoutException:
        return f"no answer within {TIMEOUT:g} s"
    except httpx.HTTPError as error:
        # Not str(error): httpx puts the URL in some of its messages.
        return f"it could not be reached ({type(error).__name__})"
    except Exception as error:  # a ping must never end the run
        return f"it could not be reached ({type(error).__name__})"
    return None


def _line(what: str, why: str) -> str:
    return f"invoicectl: the ping URL's /{what} ping failed: {why}; the run goes on"


class OutputTail:
    """The last ``limit`` bytes of what a run wrote, as plain text (no terminal control)."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self._limit = limit
        self._chunks: deque[str] = deque()
        self._size = 0
        self._lock = threading.Lock()

    def add(self, text: str) -> None:
        with self._lock:
            self._chunks.append(text)
            self._size += len(text)
            # Characters, not bytes, are counted here: four times the limit holds it in bytes.
            while self._size - len(self._chunks[0]) > 4 * self._limit:
                self._size -= len(self._chunks.popleft())

    def text(self) -> bytes:
        with self._lock:
            written = "".join(self._chunks)
        plain = _CONTROL.sub("", written).replace("\r\n", "\n").replace("\r", "\n")
        data = plain.encode("utf-8", errors="replace")[-self._limit :]
        return data.decode("utf-8", errors="ignore").encode("utf-8")


class TeeStream:
    """A text stream that writes through to ``stream`` and keeps a copy in ``tail``."""

    def __init__(self, stream: object, tail: OutputTail) -> None:
        self._stream = stream
        self._tail = tail

    def write(self, text: str) -> int:
        self._tail.add(text)
        return int(self._stream.write(text))  # type: ignore[attr-defined]

    def writelines(self, lines: object) -> None:
        for line in lines:  # type: ignore[attr-defined]
            self.write(line)

    def __getattr__(self, name: str) -> object:  # flush, isatty, fileno, encoding, ...
        return getattr(self._stream, name)

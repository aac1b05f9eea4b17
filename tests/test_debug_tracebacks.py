"""``INVOICECTL_DEBUG=1`` shows a traceback instead of the one-line error, and a bug shows one
of its own: never with the API key in it. A key pasted into a setting comes back in the
error's message (its cause's too), which the traceback prints; every form of the key the
redaction knows is hidden there, as in every other line (``cli.tracebacks``)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import quote

import pytest

from invoicectl.cli.tracebacks import hide_keys_in_tracebacks

KEY = "sk_live_SECRETKEY_abcdef0123456789"
MARKER = "[redacted]"

FORMS = {
    "as typed": KEY,
    "percent-encoded": quote(KEY, safe="").replace("_", "%5F"),
    "base64": base64.b64encode(KEY.encode()).decode(),
    "hex": KEY.encode().hex(),
}


def run_debug(tmp_path: Path, *args: str, **environ: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoicectl", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "INVOICECTL_DEBUG": "1", **environ},
        cwd=tmp_path,
    )


def assert_no_key(text: str) -> None:
    for name, form in FORMS.items():
        assert form not in text, (name, text)
        assert form.lower() not in text.lower(), (name, text)


@pytest.mark.parametrize("form", list(FORMS))
def test_a_key_in_a_setting_is_hidden_in_the_debug_traceback(tmp_path: Path, form: str) -> None:
    # An unknown profile's refusal repeats the name given: without the key hidden, the
    # traceback's last line printed it whole, in whatever form it was pasted.
    result = run_debug(tmp_path, "status", GOROUTE_API_KEY=KEY, INVOICECTL_PROFILE=FORMS[form])

    assert result.returncode == 1, result.stderr
    assert "Traceback (most recent call last):" in result.stderr, result.stderr
    assert 'profiles.py", line' in result.stderr, result.stderr
    assert f"ConfigError: unknown profile '{MARKER}" in result.stderr, result.stderr
    assert_no_key(result.stdout + result.stderr)


def test_a_key_of_the_key_file_option_is_hidden_in_the_debug_traceback(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n", encoding="utf-8")
    key_file.chmod(0o600)

    result = run_debug(
        tmp_path, "reconcile", "--api-key-file", str(key_file), INVOICECTL_REQUEST_TIMEOUT=KEY
    )

    assert "Traceback (most recent call last):" in result.stderr, result.stderr
    assert MARKER in result.stderr, result.stderr
    assert_no_key(result.stdout + result.stderr)


def test_a_key_that_hides_in_a_message_leaves_the_frames(tmp_path: Path) -> None:
    # The key's letters with dots between: no form that can be replaced, so the messages
    # are withheld; where the error happened is still shown.
    spread = ".".join(KEY)

    result = run_debug(tmp_path, "status", GOROUTE_API_KEY=KEY, INVOICECTL_PROFILE=spread)

    assert result.returncode == 1, result.stderr
    assert "Traceback (most recent call last):" in result.stderr, result.stderr
    assert 'profiles.py", line' in result.stderr, result.stderr
    assert "ConfigError: [withheld: its message, or a cause's, may hold the API key]" in (
        result.stderr
    )
    assert spread not in result.stderr
    assert_no_key(result.stderr)


def test_a_threads_traceback_hides_the_key(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # put back after the test
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    monkeypatch.setenv("GOROUTE_API_KEY", KEY)
    hide_keys_in_tracebacks([])

    def fail() -> None:
        raise ValueError(f"the base URL https://h/{KEY} failed")

    thread = threading.Thread(target=fail, name="beat")
    thread.start()
    thread.join()

    said = capsys.readouterr().err
    assert "Exception in thread beat:" in said, said
    assert f"ValueError: the base URL https://h/{MARKER} failed" in said, said
    assert_no_key(said)

"""One output contract for every command (issue 12, item 5): ``--json`` gives one JSON
document on stdout whose keys are the README's and stay so, ``--format json`` is the same,
``--quiet`` leaves only errors and the data asked for.

The golden files in ``tests/golden/`` hold each document's *shape*: every key and the type of
its value (a list: the merged shape of its items), no values, so run ids, timestamps, hashes
and paths need no normalising. A renamed, removed or retyped key fails here; a new key fails
too, until its golden file is regenerated (``INVOICECTL_UPDATE_GOLDEN=1``) and the README says
what it is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from ublfactory import write_invoice

from invoicectl.cli import app

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("INVOICECTL_UPDATE_GOLDEN") == "1"
FAST = ["--rate", "60000"]
runner = CliRunner()


def shape(value: Any) -> Any:
    """The keys and types of a JSON document, without its values."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_merged([shape(item) for item in value])] if value else []
    return {bool: "bool", int: "int", float: "float", str: "str", type(None): "null"}[type(value)]


def _merged(shapes: list[Any]) -> Any:
    """One shape for a list's items: dicts by key (a key some items lack is still listed),
    differing scalars as ``int|null``."""
    if all(isinstance(item, dict) for item in shapes):
        keys: dict[str, list[Any]] = {}
        for item in shapes:
            for key, value in item.items():
                keys.setdefault(key, []).append(value)
        return {key: _merged(values) for key, values in keys.items()}
    if all(isinstance(item, list) for item in shapes):
        inner = [element for item in shapes for element in item]
        return [_merged(inner)] if inner else []
    names = sorted({name for item in shapes for name in str(item).split("|")})
    return "|".join(names)


def invoke(*args: str) -> Any:
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Every command's JSON document from one story: validate, send, look, hold, release,
    abandon (a dry run), back up, export, verify, reconcile, an error; in a sandbox journal."""
    root = tmp_path_factory.mktemp("contract")
    outbox = root / "outbox"
    outbox.mkdir()
    for number in (1, 2):
        write_invoice(outbox, f"INV-{number}")
    (outbox / "broken.xml").write_text("<nope")  # an invalid file: scan's lists are not empty
    # A profile beside the built-in sandbox: the profiles document's values both set and not.
    (root / "config" / "invoicectl").mkdir(parents=True)
    (root / "config" / "invoicectl" / "config.toml").write_text(
        '[profiles.acme]\ntier = "standard"\nsender = "0088:1"\napi_key_env = "ACME_KEY"\n'
    )
    found: dict[str, Any] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("INVOICECTL_JOURNAL", str(root / "state" / "journal.db"))
        patch.setenv("XDG_STATE_HOME", str(root / "state"))
        patch.setenv("XDG_CONFIG_HOME", str(root / "config"))
        for name in ("GOROUTE_API_KEY", "GOROUTE_BASE_URL", "INVOICECTL_CONFIG"):
            patch.delenv(name, raising=False)
        patch.setenv("NO_COLOR", "1")
        story = {
            "scan": ["scan", str(outbox), "--sandbox", "--json"],
            "validate": ["validate", str(outbox), "--sandbox", "--json", *FAST],
            "hold": ["hold", "INV-2", "--reason", "ask", "--sandbox", "--json"],
            "release": ["release", "INV-2", "INV-1", "--sandbox", "--json"],
            "abandon": ["abandon", "INV-2", "--reason", "post", "--dry-run", "--sandbox", "--json"],
            "send_dry_run": ["send", str(outbox), "--sandbox", "--dry-run", "--json"],
            "send": ["send", str(outbox), "--sandbox", "--json", *FAST],
            "status": ["status", "--sandbox", "--json"],
            "status_period": ["status", "--sandbox", "--since", "2000-01-01", "--json"],
            "show": ["show", "INV-2", "--sandbox", "--json"],
            "receivers": ["receivers", "--sandbox", "--json"],
            "backup": ["backup", str(root / "copy.db"), "--sandbox", "--json"],
            "export": ["export", str(root / "audit"), "--sandbox", "--json"],
            "verify_export": ["verify-export", str(root / "audit"), "--json"],
            "verify_export_problems": ["verify-export", str(root), "--json"],
            "verify": ["verify", "--sandbox", "--json"],
            "reconcile": ["reconcile", "--sandbox", "--json", *FAST],
            "doctor": ["doctor", "--sandbox", "--json"],
            "error": ["show", "INV-404", "--sandbox", "--json"],
            "profiles": ["profiles", "--json"],
        }
        for name, args in story.items():
            result = invoke(*args)
            found[name] = {"args": args, "result": result}
    yield found


COMMANDS = [
    "scan",
    "validate",
    "send_dry_run",
    "send",
    "status",
    "status_period",
    "show",
    "receivers",
    "hold",
    "release",
    "abandon",
    "backup",
    "export",
    "verify_export",
    "verify_export_problems",
    "verify",
    "reconcile",
    "doctor",
    "error",
    "profiles",
]


def check_golden(name: str, document: Any, *, update: bool = UPDATE) -> None:
    path = GOLDEN / f"{name}.json"
    found = shape(document)
    if update:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(found, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    assert path.exists(), f"no golden file {path}; INVOICECTL_UPDATE_GOLDEN=1 writes it"
    assert found == json.loads(path.read_text(encoding="utf-8")), (
        f"{name}'s JSON keys changed: a script parsing them breaks. If meant, regenerate "
        f"{path.name} (INVOICECTL_UPDATE_GOLDEN=1) and update the README's 'JSON output'."
    )


@pytest.mark.parametrize("name", COMMANDS)
def test_each_command_json_has_the_golden_keys(documents: dict[str, Any], name: str) -> None:
    result = documents[name]["result"]

    document = json.loads(result.stdout)  # one document, nothing else on stdout
    check_golden(name, document)
    if isinstance(document, dict) and name != "sandbox":  # the sandbox's line is not a run's
        # README: every document that is an object carries exit_code, equal to the process's
        assert document.get("exit_code") == result.exit_code, result.stdout


def test_the_story_ends_as_told(documents: dict[str, Any]) -> None:
    """The golden shapes come from a run that did what it says (not from errors)."""
    exits = {name: documents[name]["result"].exit_code for name in COMMANDS}
    # broken.xml is invalid: exit 3 where it is counted (validate asks GoRoute about the rest)
    needs_fix = dict.fromkeys(["scan", "send_dry_run", "send", "status", "status_period"], 3)
    wanted = {**dict.fromkeys(COMMANDS, 0), **needs_fix, "release": 2, "error": 2}
    assert exits == {**wanted, "verify_export_problems": 1}, exits
    show = json.loads(documents["show"]["result"].stdout)
    assert show["invoice"]["state"] == "accepted"
    assert [attempt["outcome"] for attempt in show["attempts"]] == ["accepted"]
    assert len(show["revisions"]) == 1 and show["revisions"][0]["current"] is True
    assert [event["kind"] for event in show["events"]][:2] == ["hold", "release"]
    release = json.loads(documents["release"]["result"].stdout)
    assert [d["done"] for d in release["decisions"]] == [True, False]  # INV-1 was not held
    assert release["exit_code"] == 2  # what was refused is a usage error, as in plain text


def test_show_json_holds_no_secret_and_no_raw_bytes(documents: dict[str, Any]) -> None:
    from invoicectl.sandbox import DEFAULT_API_KEY

    text = documents["show"]["result"].stdout
    assert DEFAULT_API_KEY not in text
    assert "raw_body" not in text and "<Invoice" not in text


def test_a_renamed_key_fails_the_golden_check() -> None:
    golden = json.loads((GOLDEN / "backup.json").read_text(encoding="utf-8"))
    renamed = {("bytes" if key == "size" else key): "x" for key in golden}
    with pytest.raises(AssertionError, match="keys changed"):
        check_golden("backup", renamed, update=False)


def test_the_sandbox_says_where_it_listens_in_one_json_line() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "invoicectl", "sandbox", "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
    finally:
        process.terminate()
        process.communicate(timeout=30)
    document = json.loads(line)
    check_golden("sandbox", document)
    assert document["base_url"].startswith("http://127.0.0.1:")

"""Routing by supplier (issue 16, item 2): ``send --supplier``, a profile's send taking only
its sender's invoices, and ``send --all-profiles`` with one send process per profile, each
against its own emulator on loopback, one of them answering 429s."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sendkit import FAST_RETRY, states
from test_output_contract import check_golden
from ublfactory import invoice_xml

from invoicectl.errors import ExitCode
from invoicectl.journal import Journal
from invoicectl.sandbox import Sandbox, SandboxConfig
from invoicectl.sandbox.server import BackgroundServer
from invoicectl.scan.ingest import scan_directory, scanning
from invoicectl.send import runner
from invoicectl.send.children import run_children
from invoicectl.send.options import SendOptions
from invoicectl.settings import resolve

ACME = "0088:1111111111111"
BETA = "0007:2222222222"
NOBODY = "0088:9999999999999"
FACTORY_SUPPLIER = 'schemeID="0088">7300010000001<'
KEY_A = "sk_live_acmeACMEacme0001"
KEY_B = "sk_live_betaBETAbeta0002"


def supplied_by(supplier: str, invoice_id: str, **kwargs: Any) -> bytes:
    """An invoice whose supplier EndpointID is ``supplier``: the factory's, rewritten."""
    scheme, _, identifier = supplier.partition(":")
    data = invoice_xml(invoice_id, **kwargs)
    assert FACTORY_SUPPLIER.encode() in data
    return data.replace(FACTORY_SUPPLIER.encode(), f'schemeID="{scheme}">{identifier}<'.encode())


def write(outbox: Path, name: str, supplier: str, invoice_id: str, **kwargs: Any) -> None:
    (outbox / name).write_bytes(supplied_by(supplier, invoice_id, **kwargs))


def emulator(key: str, **overrides: Any) -> Sandbox:
    return Sandbox(SandboxConfig.for_tier("enterprise", **{
        "rate_per_minute": 1_000_000, "max_concurrent": 1000, "seed": 7,
        "api_keys": frozenset({key}), **overrides,
    }))  # fmt: skip


def options(**kwargs: Any) -> SendOptions:
    return SendOptions(
        rate_per_minute=60_000, concurrency=10, policy=FAST_RETRY, check_receivers=False,
        trust_new_journal=True, **kwargs,
    )  # fmt: skip


# ---- send --supplier: one supplier's invoices into one journal ------------------------------


def test_a_supplier_s_send_takes_only_its_invoices(tmp_path: Path, outbox: Path) -> None:
    write(outbox, "a1.xml", ACME, "INV-1")
    write(outbox, "b1.xml", BETA, "INV-2")
    write(outbox, "same-a.xml", ACME, "INV-SAME", note="acme's")
    write(outbox, "same-b.xml", BETA, "INV-SAME", note="beta's")
    (outbox / "broken.xml").write_text("<nope")
    sandbox = emulator(KEY_A)
    settings = resolve(
        journal=tmp_path / "acme.db",
        environ={"GOROUTE_API_KEY": KEY_A, "GOROUTE_BASE_URL": "http://acme.test"},
    )

    report, summary = runner.send(
        settings,
        scanning(outbox, supplier=ACME),
        options(supplier=ACME),
        transport=sandbox.transport(),
    )

    assert sorted(states(tmp_path / "acme.db")) == ["INV-1", "INV-SAME"]
    assert set(states(tmp_path / "acme.db").values()) == {"accepted"}
    assert sandbox.stats()["per_invoice"] == {"INV-1": 1, "INV-SAME": 1}
    assert report.left_for_others == 3 and report.files == 2
    # Two of its own, the rest left alone: not a duplicate ID here. The broken file is no
    # profile's to take, so every profile's send names it (helper-97: none said a word).
    assert report.supplier_untold == [("broken.xml", report.supplier_untold[0].reason)]
    assert report.supplier_untold[0].reason.startswith("not well-formed XML")
    assert summary.exit_code == ExitCode.NEEDS_FIX, summary.exit_causes
    assert "  untold   broken.xml: not well-formed XML" in "\n".join(report.summary_lines())


def test_a_file_of_no_supplier_is_named_by_a_supplier_s_send(tmp_path: Path, outbox: Path):
    """A file whose supplier EndpointID is missing is no profile's either."""
    write(outbox, "a1.xml", ACME, "INV-1")
    data = supplied_by(ACME, "INV-NOBODY")
    start = data.index(b"<cac:AccountingSupplierParty>")
    end = data.index(b"</cac:AccountingSupplierParty>") + len(b"</cac:AccountingSupplierParty>")
    (outbox / "nobody.xml").write_bytes(data[:start] + data[end:])
    settings = resolve(
        journal=tmp_path / "acme.db",
        environ={"GOROUTE_API_KEY": KEY_A, "GOROUTE_BASE_URL": "http://acme.test"},
    )

    report, summary = runner.send(
        settings, scanning(outbox, supplier=ACME), options(supplier=ACME),
        transport=emulator(KEY_A).transport(),
    )  # fmt: skip

    assert [problem.subject for problem in report.supplier_untold] == ["nobody.xml"]
    assert "no supplier EndpointID" in report.supplier_untold[0].reason
    assert report.to_dict()["supplier_untold"] == report.supplier_untold  # only when some
    assert summary.exit_code == ExitCode.NEEDS_FIX


def test_a_routed_profile_s_scan_reads_only_the_files_routed_to_it(
    tmp_path: Path, outbox: Path
) -> None:
    """send --all-profiles hands each profile's send the names of its own files: another
    supplier's files are not read, parsed or hashed there (before, every profile's send read
    the whole outbox, a first scan and every run after it)."""
    from invoicectl.send.routing import route

    write(outbox, "a1.xml", ACME, "INV-1")
    write(outbox, "a2.xml", ACME, "INV-2")
    for number in range(5):
        write(outbox, f"b{number}.xml", BETA, f"INV-B{number}")
    routing = route(outbox, {ACME: "acme", BETA: "beta"}, ["acme", "beta"])
    names = tmp_path / "acme.names"
    names.write_text("\0".join(routing.names["acme"]))

    with Journal(tmp_path / "acme.db") as journal:
        report = scanning(outbox, supplier=ACME, names=names)(journal)

    assert sorted(routing.names["acme"]) == ["a1.xml", "a2.xml"]
    assert report.files == 2 and report.left_for_others == 5  # beta's, not read here
    assert sorted(report.new) == ["INV-1", "INV-2"]


def test_a_routed_profile_with_no_file_of_its_own_is_not_an_empty_outbox(
    tmp_path: Path, outbox: Path
) -> None:
    """helper-51: a profile whose supplier had no invoice in the outbox that day exited 66
    ("no *.xml file ... is the path right?"), and so did the whole routed run and its ping,
    every cron run a bureau's client sent nothing."""
    from invoicectl.send.routing import route

    write(outbox, "a1.xml", ACME, "INV-1")
    routing = route(outbox, {ACME: "acme", BETA: "beta"}, ["acme", "beta"])
    names = tmp_path / "beta.names"
    names.write_text("\0".join(routing.names.get("beta", [])))

    with Journal(tmp_path / "beta.db") as journal:
        report = scanning(outbox, supplier=BETA, names=names)(journal)

    assert report.files == 0 and report.left_for_others == 1
    assert report.input_code == ExitCode.OK


def test_a_supplier_with_no_file_in_the_outbox_is_not_an_empty_outbox(
    tmp_path: Path, outbox: Path
) -> None:
    write(outbox, "b1.xml", BETA, "INV-2")
    settings = resolve(  # https: a run over the network refuses plain http before it scans
        journal=tmp_path / "acme.db",
        environ={"GOROUTE_API_KEY": KEY_A, "GOROUTE_BASE_URL": "https://acme.test"},
    )

    report, summary = runner.send(
        settings, scanning(outbox, supplier=ACME), options(supplier=ACME), transport=None
    )

    assert report.files == 0 and report.left_for_others == 1
    assert summary.exit_code == 0  # not 66: the outbox holds files, of another supplier


def test_an_invoice_of_another_supplier_already_in_the_journal_is_held_never_sent(
    tmp_path: Path, outbox: Path
) -> None:
    """Scanned before the profile had a sender (a plain scan takes every supplier): the
    profile's send holds what is not its own, and sends the rest."""
    write(outbox, "a1.xml", ACME, "INV-1")
    write(outbox, "b1.xml", BETA, "INV-2")
    journal_path = tmp_path / "acme.db"
    with Journal(journal_path) as journal:
        scan_directory(journal, outbox)
    sandbox = emulator(KEY_A)
    settings = resolve(
        journal=journal_path,
        environ={"GOROUTE_API_KEY": KEY_A, "GOROUTE_BASE_URL": "http://acme.test"},
    )

    report, summary = runner.send(
        settings, scanning(outbox, supplier=ACME), options(supplier=ACME),
        transport=sandbox.transport(),
    )  # fmt: skip

    assert report.held_for_others == ["INV-2"]
    assert sandbox.stats()["per_invoice"] == {"INV-1": 1}
    with Journal(journal_path) as journal:
        held = journal.invoice("INV-2")
        assert held is not None and held.state == "pending" and held.hold == "held"
        assert held.held_by == "supplier check"
        assert f"supplier {BETA} is not this profile's sender {ACME}" in (held.hold_reason or "")
    assert summary.exit_code == 4  # on hold: a person decides


# ---- send --all-profiles: one process per profile --------------------------------------------


def cli(
    *args: str, environ: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoicectl", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=timeout,
    )


def bureau(tmp_path: Path, acme_url: str, beta_url: str) -> dict[str, str]:
    """Two profiles, their keys in a file and in a variable; an environment naming them."""
    key_file = tmp_path / "acme.key"
    key_file.write_text(KEY_A + "\n")
    key_file.chmod(0o600)
    config = tmp_path / "config.toml"
    config.write_text(f"""
[profiles.acme]
base_url = "{acme_url}"
api_key_file = "{key_file}"
rate = 60000
sender = "{ACME}"
[profiles.beta]
base_url = "{beta_url}"
api_key_env = "BETA_KEY"
rate = 60000
concurrency = 2
sender = "{BETA}"
""")
    environ = {k: v for k, v in os.environ.items() if k != "INVOICECTL_JOURNAL"}
    environ.update({"INVOICECTL_CONFIG": str(config), "BETA_KEY": KEY_B,
                    "XDG_STATE_HOME": str(tmp_path / "state")})  # fmt: skip
    return environ


def journal_of(tmp_path: Path, profile: str) -> Path:
    return tmp_path / "state" / "invoicectl" / f"journal-{profile}.db"


FLAGS = ["--no-receiver-check", "--trust-new-journal", "--max-wait", "1", "--json"]


def test_each_invoice_goes_through_its_supplier_s_account_and_a_429_account_stalls_nobody(
    tmp_path: Path, outbox: Path
) -> None:
    for number in range(1, 9):
        write(outbox, f"a{number}.xml", ACME, f"A-{number}")
        write(outbox, f"b{number}.xml", BETA, f"B-{number}")
    write(outbox, "same-a.xml", ACME, "INV-SAME", note="acme's")
    write(outbox, "same-b.xml", BETA, "INV-SAME", note="beta's")
    write(outbox, "stray.xml", NOBODY, "STRAY-1")
    acme = emulator(KEY_A)
    beta = emulator(KEY_B, rate_per_minute=3)  # the 4th request in a minute: 429, Retry-After
    with BackgroundServer(acme) as acme_server, BackgroundServer(beta) as beta_server:
        environ = bureau(tmp_path, acme_server.base_url, beta_server.base_url)
        started = time.monotonic()
        result = cli("send", "--all-profiles", str(outbox), *FLAGS, environ=environ)
        took = time.monotonic() - started
        acme_stats, beta_stats = acme.stats(), beta.stats()

    document = json.loads(result.stdout)
    # Each invoice through its own account, exactly once; INV-SAME once at each.
    assert acme_stats["per_invoice"] == {**{f"A-{n}": 1 for n in range(1, 9)}, "INV-SAME": 1}
    assert acme_stats["duplicates"] == [] and acme_stats["rate_limited"] == 0
    assert set(beta_stats["per_invoice"]) <= {*(f"B-{n}" for n in range(1, 9)), "INV-SAME"}
    assert all(count == 1 for count in beta_stats["per_invoice"].values())
    assert len(beta_stats["per_invoice"]) == 3 and beta_stats["rate_limited"] >= 1
    # The 429 account neither stalled nor failed the other: acme is done, beta continues later.
    profiles = {child["name"]: child for child in document["profiles"]}
    assert profiles["acme"]["exit_code"] == 0 and profiles["acme"]["files"] == 9
    assert profiles["beta"]["exit_code"] == 75 and profiles["beta"]["files"] == 9
    assert "rate_limit" in profiles["beta"]["send"]["stops"]
    assert set(states(journal_of(tmp_path, "acme")).values()) == {"accepted"}
    beta_states = states(journal_of(tmp_path, "beta"))
    assert sorted(beta_states.values()).count("accepted") == 3
    assert {state for state in beta_states.values()} <= {"accepted", "pending"}
    assert "STRAY-1" not in beta_states and "STRAY-1" not in states(journal_of(tmp_path, "acme"))
    # The stray invoice: never sent, said, and the exit code asks a person.
    assert document["unrouted"] == [{
        "file": "stray.xml", "invoice_id": "STRAY-1", "supplier": NOBODY,
        "reason": f"no profile for supplier {NOBODY}; not sent", "exit_code": 4,
    }]  # fmt: skip
    assert result.returncode == document["exit_code"] == 4, result.stderr
    assert took < 50  # beta's Retry-After (60 s) was not waited out by anyone: "does not hang"
    check_golden("send_all_profiles", document)
    for secret in (KEY_A, KEY_B):
        assert secret not in result.stdout + result.stderr


def test_the_text_output_shows_each_profile_and_what_no_profile_takes(
    tmp_path: Path, outbox: Path
) -> None:
    write(outbox, "a1.xml", ACME, "A-1")
    write(outbox, "stray.xml", NOBODY, "STRAY-1")
    (outbox / "broken.xml").write_text("<nope")
    acme, beta = emulator(KEY_A), emulator(KEY_B)
    with BackgroundServer(acme) as acme_server, BackgroundServer(beta) as beta_server:
        environ = bureau(tmp_path, acme_server.base_url, beta_server.base_url)
        result = cli("send", str(outbox), "--profiles", "acme", "--no-receiver-check",
                     "--trust-new-journal", environ=environ)  # fmt: skip
        again = cli("send", str(outbox), "--profiles=acme", "--no-receiver-check",
                    environ=environ)  # fmt: skip

    assert acme.stats()["per_invoice"] == {"A-1": 1} and beta.stats()["sends_received"] == 0
    lines = result.stdout.splitlines()
    assert any(f"profile acme ({ACME}): 1 file; exit 0: 1 accepted" in line
               for line in lines), result.stdout  # fmt: skip
    assert any(f"STRAY-1 (stray.xml): no profile for supplier {NOBODY}; not sent" in line
               for line in lines)  # fmt: skip
    assert any("broken.xml" in line and "supplier cannot be told" in line for line in lines)
    assert "[acme] " in result.stderr  # the child's own lines, tagged with its profile
    assert result.returncode == 4  # no profile (4) outranks no supplier (3)
    assert "exit 4: 1 file with no profile for the supplier; also 1 file without a supplier" in (
        result.stderr
    )
    # Every run says it again while the file is there; still never sent.
    assert again.returncode == 4 and "STRAY-1" in again.stdout
    assert "STRAY-1" not in acme.stats()["per_invoice"]


@pytest.mark.parametrize(
    ("args", "environ_extra", "message"),
    [
        (["--rate", "5"], {}, "--rate cannot go with --all-profiles"),
        (["--journal", "/tmp/x.db"], {}, "--journal cannot go with"),
        (["--sandbox"], {}, "--sandbox cannot go with"),
        (["--profile", "acme"], {}, "--profile cannot go with"),
        ([], {"GOROUTE_API_KEY": "sk_live_shared_key_000"}, "$GOROUTE_API_KEY is set"),
        ([], {"INVOICECTL_JOURNAL": "/tmp/one.db"}, "$INVOICECTL_JOURNAL is set"),
    ],
)
def test_what_would_send_every_profile_through_one_account_is_refused(
    tmp_path: Path, outbox: Path, args: list[str], environ_extra: dict[str, str], message: str
) -> None:
    write(outbox, "a1.xml", ACME, "A-1")
    environ = {**bureau(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9"), **environ_extra}

    result = cli("send", "--all-profiles", str(outbox), *args, environ=environ)

    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not journal_of(tmp_path, "acme").exists()  # nothing ran


def test_a_profile_s_send_takes_only_its_sender_s_invoices(tmp_path: Path, outbox: Path) -> None:
    write(outbox, "a1.xml", ACME, "A-1")
    write(outbox, "b1.xml", BETA, "B-1")
    acme = emulator(KEY_A)
    with BackgroundServer(acme) as server:
        environ = bureau(tmp_path, server.base_url, "http://127.0.0.1:9")
        result = cli("--profile", "acme", "send", str(outbox), "--no-receiver-check",
                     "--trust-new-journal", environ=environ)  # fmt: skip
        other = cli("--profile", "acme", "send", str(outbox), "--supplier", BETA,
                    environ=environ)  # fmt: skip

    assert result.returncode == 0, result.stderr
    assert acme.stats()["per_invoice"] == {"A-1": 1}
    assert "1 file(s) of other suppliers" in result.stderr
    assert other.returncode == 2 and f"--supplier {BETA} is not the sender of profile acme" in (
        other.stderr
    )


# ---- the children: death and signals ---------------------------------------------------------


def test_a_child_that_dies_is_reported_with_how_it_died() -> None:
    killed = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    fine = [sys.executable, "-c", "print('{\"exit_code\": 0}')"]

    finished, signals = run_children({"a": killed, "b": fine}, dict(os.environ), print)

    assert finished["a"].died == "SIGKILL" and finished["a"].document is None
    assert finished["b"].died is None and finished["b"].document == {"exit_code": 0}
    assert signals == []


def test_sigterm_reaches_every_profile_s_send_and_each_saves_its_state(
    tmp_path: Path, outbox: Path
) -> None:
    for number in range(1, 31):
        write(outbox, f"a{number}.xml", ACME, f"A-{number}")
        write(outbox, f"b{number}.xml", BETA, f"B-{number}")
    acme, beta = emulator(KEY_A, latency_ms=300), emulator(KEY_B, latency_ms=300)
    with BackgroundServer(acme) as acme_server, BackgroundServer(beta) as beta_server:
        environ = bureau(tmp_path, acme_server.base_url, beta_server.base_url)
        process = subprocess.Popen(
            [sys.executable, "-m", "invoicectl", "send", "--all-profiles", str(outbox),
             "--no-receiver-check", "--trust-new-journal", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # both have sent something: both are mid-run
            if acme.stats()["sends_received"] and beta.stats()["sends_received"]:
                break
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=90)
        acme_stats, beta_stats = acme.stats(), beta.stats()

    document = json.loads(stdout)
    assert process.returncode == document["exit_code"] == 130, stderr
    for name, stats in (("acme", acme_stats), ("beta", beta_stats)):
        child = next(one for one in document["profiles"] if one["name"] == name)
        assert child["died"] is None and child["send"]["signal"] == "SIGTERM", child
        assert child["exit_code"] == 130
        assert stats["duplicates"] == []
        journal = states(journal_of(tmp_path, name))
        assert len(journal) == 30  # every invoice in its journal: none lost
        assert 0 < list(journal.values()).count("accepted") < 30  # stopped mid-run


def test_an_account_that_refuses_the_key_stalls_nobody(tmp_path: Path, outbox: Path) -> None:
    for number in range(1, 4):
        write(outbox, f"a{number}.xml", ACME, f"A-{number}")
        write(outbox, f"b{number}.xml", BETA, f"B-{number}")
    acme, beta = emulator(KEY_A), emulator("sk_live_another_key_entirely")  # beta's: 401
    with BackgroundServer(acme) as acme_server, BackgroundServer(beta) as beta_server:
        environ = bureau(tmp_path, acme_server.base_url, beta_server.base_url)
        result = cli("send", "--all-profiles", str(outbox), *FLAGS, environ=environ)

    document = json.loads(result.stdout)
    by_name = {child["name"]: child for child in document["profiles"]}
    assert acme.stats()["per_invoice"] == {"A-1": 1, "A-2": 1, "A-3": 1}
    assert beta.stats()["per_invoice"] == {}
    assert by_name["acme"]["exit_code"] == 0 and by_name["beta"]["exit_code"] == 5
    assert result.returncode == 5  # the refused credentials outrank the rest
    assert set(states(journal_of(tmp_path, "beta")).values()) == {"pending"}


def test_an_invoice_sent_through_another_profile_s_account_is_never_sent_again(
    tmp_path: Path, outbox: Path
) -> None:
    """acme's journal was used before profiles had senders: a plain send took every
    supplier's invoices through acme's account. beta's own send must not send B-1 again
    (its receiver would have it twice); acme's holds nothing it already sent."""
    write(outbox, "a1.xml", ACME, "A-1")
    write(outbox, "b1.xml", BETA, "B-1")
    write(outbox, "b2.xml", BETA, "B-2")
    acme, beta = emulator(KEY_A), emulator(KEY_B)
    old = tmp_path / "old.db"
    with BackgroundServer(acme) as acme_server, BackgroundServer(beta) as beta_server:
        environ = bureau(tmp_path, acme_server.base_url, beta_server.base_url)
        config = Path(environ["INVOICECTL_CONFIG"])
        config.write_text(config.read_text().replace(
            "[profiles.acme]\n", f'[profiles.acme]\njournal = "{old}"\n'
        ))  # fmt: skip
        (outbox / "b2.xml").rename(tmp_path / "b2.xml")  # B-2 comes later: never sent by acme
        before = cli("send", str(outbox), "--journal", str(old), "--no-receiver-check",
                     "--trust-new-journal", environ={**environ, "GOROUTE_API_KEY": KEY_A,
                     "GOROUTE_BASE_URL": acme_server.base_url})  # fmt: skip
        (tmp_path / "b2.xml").rename(outbox / "b2.xml")
        result = cli("send", "--all-profiles", str(outbox), *FLAGS, environ=environ)

    assert before.returncode == 0, before.stderr
    assert acme.stats()["per_invoice"] == {"A-1": 1, "B-1": 1}  # both, once, before profiles
    assert beta.stats()["per_invoice"] == {"B-2": 1}  # B-1 not again
    assert "B-1 (acme)" in result.stderr and "never sent again through beta" in result.stderr
    assert "B-1" not in states(journal_of(tmp_path, "beta"))
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("before_by", ["legacy", "no profile"])
def test_an_invoice_sent_through_a_profile_without_a_sender_is_never_sent_again(
    tmp_path: Path, outbox: Path, before_by: str
) -> None:
    """Review 16: a profile with no sender (an account used before senders were set), or the
    top-level journal of a send with no profile (before profiles), is another journal too:
    B-1, sent through acme's account from it, must not go out again through beta's."""
    write(outbox, "b1.xml", BETA, "B-1")
    acme, beta = emulator(KEY_A), emulator(KEY_B)
    old = tmp_path / "old.db"
    with BackgroundServer(acme) as acme_server, BackgroundServer(beta) as beta_server:
        environ = bureau(tmp_path, acme_server.base_url, beta_server.base_url)
        config = Path(environ["INVOICECTL_CONFIG"])
        config.write_text(config.read_text() + (
            f'[profiles.legacy]\nbase_url = "{acme_server.base_url}"\n'
            f'api_key_file = "{tmp_path / "acme.key"}"\njournal = "{old}"\n'
        ))  # fmt: skip
        account = {"GOROUTE_API_KEY": KEY_A, "GOROUTE_BASE_URL": acme_server.base_url}
        profile = ["--profile", "legacy"] if before_by == "legacy" else []
        plain = environ if profile else {**environ, **account}
        before = cli(*profile, "send", str(outbox), "--no-receiver-check",
                     "--trust-new-journal", environ=plain)  # fmt: skip
        result = cli("send", "--all-profiles", str(outbox), *FLAGS, environ=environ)

    assert before.returncode == 0, before.stderr
    assert acme.stats()["per_invoice"] == {"B-1": 1}
    assert beta.stats()["per_invoice"] == {}, result.stderr  # B-1 not again
    assert f"B-1 ({before_by})" in result.stderr


def test_a_stop_signal_heard_while_a_child_starts_reaches_it(monkeypatch) -> None:
    """Review 16: a SIGTERM that comes while a profile's send process is being started (after
    the check that no signal came, before it is listed) reaches it too: else it sends its
    whole outbox after the operator asked everything to stop."""
    real = subprocess.Popen

    def starting(*args: Any, **kwargs: Any) -> subprocess.Popen[str]:
        process = real(*args, **kwargs)
        signal.raise_signal(signal.SIGTERM)  # heard before run_children lists it
        return process

    monkeypatch.setattr(subprocess, "Popen", starting)
    waits = [sys.executable, "-c", "import time; time.sleep(30)"]

    started = time.monotonic()
    finished, signals = run_children({"a": waits}, dict(os.environ), print)

    assert signals == ["SIGTERM"]
    assert finished["a"].died == "SIGTERM"
    assert time.monotonic() - started < 25  # it stopped, not slept its 30 s out


def test_the_shared_ping_url_is_pinged_once_with_the_worst_code(
    tmp_path: Path, outbox: Path
) -> None:
    """$INVOICECTL_PING_URL (the README's cron set-up) reached every profile's send: the
    monitor got /start twice, then /5 and /0, and ended on healthy while the run exited 5."""
    from hostile import HostileServer, answer

    write(outbox, "a1.xml", ACME, "A-1")
    write(outbox, "b1.xml", BETA, "B-1")
    acme, beta = emulator(KEY_A), emulator("sk_live_another_key_entirely")  # beta's: 401
    monitor = HostileServer(answer(200, b"OK"))
    with BackgroundServer(acme) as acme_server, BackgroundServer(beta) as beta_server, monitor:
        environ = bureau(tmp_path, acme_server.base_url, beta_server.base_url)
        environ["INVOICECTL_PING_URL"] = f"{monitor.base_url}/job"
        result = cli("send", "--all-profiles", str(outbox), *FLAGS, environ=environ)

    assert result.returncode == 5, result.stderr
    assert [request.path for request in monitor.requests] == ["/job/start", "/job/5"]


def test_a_routed_dry_run_pings_nothing(tmp_path: Path, outbox: Path) -> None:
    """helper-93: `send --all-profiles --dry-run` pinged /start and /0, and the monitor took
    a run that sent nothing for a healthy one (`send --dry-run` does not ping)."""
    from hostile import HostileServer, answer

    write(outbox, "a1.xml", ACME, "A-1")
    monitor = HostileServer(answer(200, b"OK"))
    with monitor:
        environ = bureau(tmp_path, "https://acme.invalid", "https://beta.invalid")
        environ["INVOICECTL_PING_URL"] = f"{monitor.base_url}/job"
        result = cli("send", "--all-profiles", str(outbox), "--dry-run", environ=environ)

    assert result.returncode == 0, result.stderr
    assert monitor.requests == []


def test_each_profile_writes_a_metrics_file_of_its_own(tmp_path: Path, outbox: Path) -> None:
    """helper-51: the README said each profile's send writes a metrics_file of its own
    profile, but a profile refused the key (unknown key 'metrics_file'); the top-level one
    was not written, and nothing said so."""
    write(outbox, "a1.xml", ACME, "A-1")
    write(outbox, "b1.xml", BETA, "B-1")
    acme, beta = emulator(KEY_A), emulator(KEY_B)
    with BackgroundServer(acme) as acme_server, BackgroundServer(beta) as beta_server:
        environ = bureau(tmp_path, acme_server.base_url, beta_server.base_url)
        config = Path(environ["INVOICECTL_CONFIG"])
        text = config.read_text().replace(
            "[profiles.acme]\n", f'metrics_file = "{tmp_path / "top.prom"}"\n[profiles.acme]\n'
        )
        for name in ("acme", "beta"):
            text = text.replace(
                f"[profiles.{name}]\n",
                f'[profiles.{name}]\nmetrics_file = "{tmp_path / name}.prom"\n',
            )
        config.write_text(text)
        result = cli("send", "--all-profiles", str(outbox), *FLAGS, environ=environ)

    assert result.returncode == 0, result.stderr
    series: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    for name in ("acme", "beta"):
        text = (tmp_path / f"{name}.prom").read_text()
        samples = [
            sample for family in text_string_to_metric_families(text) for sample in family.samples
        ]
        assert {sample.labels["profile"] for sample in samples} == {name}
        assert {sample.labels["writer"] for sample in samples} == {"send"}
        series += [(sample.name, tuple(sorted(sample.labels.items()))) for sample in samples]
    # helper-68: both files held the same series (labels only writer): node_exporter's
    # textfile collector refuses duplicates and drops one file's samples.
    assert len(series) == len(set(series)) > 0
    assert not (tmp_path / "top.prom").exists()
    assert "writes no top-level metrics_file; give each profile a metrics_file" in result.stderr


@pytest.mark.parametrize("named", ["", ",", " , "])
def test_profiles_naming_none_is_refused_not_a_green_run(
    tmp_path: Path, outbox: Path, named: str
) -> None:
    """helper-67: `--profiles "$PROFILES"` with the variable unset sent nothing and exited
    0, "nothing needs attention": a monitor stayed green while no invoice went out."""
    write(outbox, "a1.xml", ACME, "A-1")
    environ = bureau(tmp_path, "http://127.0.0.1:9", "http://127.0.0.1:9")

    result = cli("send", str(outbox), "--profiles", named, environ=environ)

    assert result.returncode == 2, result.stdout + result.stderr
    assert "--profiles names no profile" in result.stderr


def test_a_config_file_others_can_write_is_warned_about_once_for_every_profile(
    tmp_path: Path, outbox: Path
) -> None:
    """helper-103: each profile's send reads the config file too; the warning is the
    parent's alone, not one line more a profile."""
    write(outbox, "a1.xml", ACME, "A-1")
    write(outbox, "b1.xml", BETA, "B-1")
    environ = bureau(tmp_path, "https://acme.invalid", "https://beta.invalid")
    config = Path(environ["INVOICECTL_CONFIG"])
    config.chmod(0o666)

    result = cli("send", "--all-profiles", str(outbox), "--dry-run", environ=environ)

    assert result.returncode == 0, result.stderr
    warned = [line for line in result.stderr.splitlines() if "writable by others" in line]
    assert len(warned) == 1, result.stderr
    assert warned[0].endswith(f"whoever can change it can redirect sends; run chmod go-w {config}")

"""Many accounts at once: `send --all-profiles` for 20 GoRoute accounts at 500/min each.

One emulator on loopback (in this process, real HTTP) that knows 20 API keys, each with its
own limit of 500 a minute (GoRoute's "independent rate limits"); 20 profiles in a config
file, each with its key, its sender and its own journal; an outbox holding each supplier's
invoices, enough for the period. `invoicectl send OUTBOX --all-profiles --deadline SECONDS`
runs one send per profile at once. Printed: accepted per account and in all, achieved ÷ the
sum of the limits over the period (each send paces itself to its own limit), the 429s the
emulator served (target 0), and the CPU of every invoicectl process per accepted invoice.

    python benchmarks/accounts.py [--accounts 20] [--limit 500] [--seconds 60]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from outbox import invoice  # noqa: E402

from invoicectl.sandbox import Sandbox, SandboxConfig  # noqa: E402
from invoicectl.sandbox.server import BackgroundServer  # noqa: E402

_SUPPLIER = '<cbc:EndpointID schemeID="0088">7300010000001</cbc:EndpointID>'


def supplier_of(account: int) -> str:
    return f"0088:73000100{account:05d}"


def write_accounts(work: Path, accounts: int, per_account: int, limit: int) -> Path:
    """The outbox (every account's invoices, its supplier in each) and the config file."""
    outbox = work / "outbox"
    outbox.mkdir()
    rng = random.Random(3)
    lines = [f'base_url = "{{base_url}}"\nrate = {limit}\nconcurrency = 20\n']
    for account in range(accounts):
        scheme, endpoint = supplier_of(account).split(":")
        own = f'<cbc:EndpointID schemeID="{scheme}">{endpoint}</cbc:EndpointID>'
        for number in range(per_account):
            invoice_id = f"A{account:02d}-{number:05d}"
            body = invoice(invoice_id, rng).replace(_SUPPLIER.encode(), own.encode(), 1)
            (outbox / f"{invoice_id}.xml").write_bytes(body)
        key_file = work / f"key-{account:02d}"
        key_file.write_text(f"sk_test_account_{account:02d}")
        key_file.chmod(0o600)
        lines.append(
            f'[profiles.acct{account:02d}]\napi_key_file = "{key_file}"\n'
            f'sender = "{supplier_of(account)}"\njournal = "{work / f"j{account:02d}.db"}"\n'
        )
    (work / "config.toml").write_text("\n".join(lines))
    return outbox


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--accounts", type=int, default=20)
    parser.add_argument("--limit", type=int, default=500, help="requests a minute per account")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="invoicectl-accounts-"))
    try:
        per_account = int(args.limit * args.seconds / 60 * 1.2) + 20
        outbox = write_accounts(work, args.accounts, per_account, args.limit)
        keys = frozenset(f"sk_test_account_{n:02d}" for n in range(args.accounts))
        config = SandboxConfig.for_tier(
            "enterprise", rate_per_minute=args.limit, max_concurrent=50,
            latency_ms=args.latency_ms, api_keys=keys, seed=5,
        )  # fmt: skip
        sandbox = Sandbox(config)
        with BackgroundServer(sandbox) as server:
            text = (work / "config.toml").read_text().replace("{base_url}", server.base_url)
            (work / "config.toml").write_text(text)
            env = {
                key: value
                for key, value in os.environ.items()
                if key not in ("GOROUTE_API_KEY", "GOROUTE_BASE_URL", "INVOICECTL_JOURNAL")
            }
            env["INVOICECTL_CONFIG"] = str(work / "config.toml")
            command = [sys.executable, "-m", "invoicectl", "send", str(outbox), "--all-profiles"]
            command += ["--deadline", f"{args.seconds:g}", "--quiet"]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.monotonic()
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            elapsed = time.monotonic() - started
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            served = sandbox.stats()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    accepted = served["accepted"]
    per_account_accepted = {}
    for invoice_id in served["per_invoice"]:
        account = invoice_id.split("-")[0]
        per_account_accepted[account] = per_account_accepted.get(account, 0) + 1
    limit_total = args.accounts * args.limit / 60 * args.seconds
    fewest, most = min(per_account_accepted.values()), max(per_account_accepted.values())
    print(
        f"{args.accounts} accounts x {args.limit}/min, {args.seconds:g} s (--deadline), on "
        f"{os.cpu_count()} CPUs: exit {done.returncode}, {elapsed:.1f} s in all"
    )
    print(
        f"accepted {accepted} (per account {fewest}-{most}); achieved / sum of limits over "
        f"the period = {accepted / limit_total:.3f}; 429s served: {served['rate_limited']}; "
        f"duplicates: {len(served['duplicates'])}"
    )
    print(
        f"CPU of every invoicectl process: {cpu:.1f} s = {cpu / max(accepted, 1) * 1000:.2f} ms "
        "per accepted invoice (start-up, routing and scan included)"
    )
    if done.returncode not in (0, 75):
        print(done.stderr[-2000:], file=sys.stderr)


if __name__ == "__main__":
    main()

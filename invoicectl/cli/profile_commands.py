"""``invoicectl profiles``: the accounts the config file names, and where each value came from.

Never the key, nor any part of it: a profile says only whether its key is found (and, if
not, why, in words that never quote it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from invoicectl.cli.app import app
from invoicectl.cli.options import JsonOption, QuietOption

if TYPE_CHECKING:
    from invoicectl.profile_list import Listed


@app.command()
def profiles(as_json: JsonOption = False, quiet: QuietOption = False) -> None:
    """List the profiles (accounts) and where each value came from.

    A profile is a [profiles.NAME] table of the config file: one GoRoute account. Each
    value says where it came from (option, environment, profile, config file, default);
    `sandbox` is built in. Exit 0; 1 for a config file with a bad profile.

    \b
    Examples:
      invoicectl profiles
      invoicectl profiles --json
      invoicectl profiles --profile acme   # --profile: any command
    """
    from invoicectl.profile_list import list_profiles
    from invoicectl.render.formats import to_json

    listed = list_profiles()
    if as_json:
        print(to_json({"profiles": [one.to_dict() for one in listed], "exit_code": 0}))
    elif not quiet:
        for one in listed:
            print(_block(one))
    raise typer.Exit(0)


def _block(one: Listed) -> str:
    key = "found" if one.key_found else f"NOT FOUND: {one.key_problem}"
    tier = f"{one.tier}, " if one.tier else ""
    rows = [
        ("base_url", one.base_url),
        ("limits", f"{tier}{one.rate}/min, {one.concurrency} concurrent"),
        ("journal", one.journal),
        ("sender", one.sender or "(none: not routed by supplier)"),
        ("api key", key),
    ]
    lines = [f"{one.name}"]
    for label, value in rows:
        source = one.sources.get("rate" if label == "limits" else label.replace(" ", "_"), "")
        lines.append(f"  {label:<9} {value}  [{source}]")
    return "\n".join(lines)

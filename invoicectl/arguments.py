"""Options read at the command group, before a command's own parser sees the arguments
(``--log-format``, ``--profile``): pure, importing nothing, so settings and the CLI share it."""

from __future__ import annotations


def split_option(args: list[str], option: str) -> tuple[str | None, list[str]]:
    """The value of ``option`` given before ``--`` (the last one, as ``--x V`` or ``--x=V``;
    "" when it ends the line), and the arguments without it, for the command's own parser,
    which does not know it. Past ``--`` everything is an argument."""
    cut = args.index("--") if "--" in args else len(args)
    options, rest = args[:cut], args[cut:]
    value: str | None = None
    kept: list[str] = []
    skip = False
    for index, arg in enumerate(options):
        if skip:
            skip = False
        elif arg == option:
            value = options[index + 1] if index + 1 < len(options) else ""
            skip = True
        elif arg.startswith(option + "="):
            value = arg.partition("=")[2]
        else:
            kept.append(arg)
    return value, kept + rest

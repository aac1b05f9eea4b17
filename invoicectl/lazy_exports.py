"""A package's re-exported names, each imported from its module at its first use."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``homes`` maps each name to the submodule
    that defines it; a name is imported once, then kept in the package's namespace."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = import_module(package)
        value = getattr(import_module(f"{package}.{home}"), name)
        setattr(module, name, value)
        return value

    return __getattr__

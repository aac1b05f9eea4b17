"""The package's shape, checked: where SQL lives, who changes a state, how deep imports go.

Issue 10 drew these lines; these tests keep them. Imports are counted as an import-graph tool
counts them: every ``import`` statement anywhere in a module (inside functions too) is an
edge, and the depth of the package is its longest chain of modules.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "invoicectl"
MAX_DEPTH = 9
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


def _imports(name: str) -> set[str]:
    edges = set()
    for node in ast.walk(TREES[name]):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        edges.update(target for target in targets if target in MODULES and target != name)
    return edges


IMPORTS = {name: _imports(name) for name in MODULES}


@cache
def _chain(name: str) -> tuple[str, ...]:
    """The longest chain of imports from ``name`` down (the graph has no cycles)."""
    below = [_chain(imported) for imported in IMPORTS[name]]
    return (name, *max(below, key=len, default=()))


def _outside(package: str) -> list[str]:
    return [name for name in MODULES if not name.startswith(f"invoicectl.{package}")]


def test_the_package_imports_have_no_cycles() -> None:
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in visiting, " -> ".join((*path, name))
        if name in done:
            return
        visiting.add(name)
        for imported in IMPORTS[name]:
            visit(imported, (*path, name))
        visiting.remove(name)
        done.add(name)

    for name in MODULES:
        visit(name, ())


def test_the_longest_import_chain_is_at_most_nine_modules() -> None:
    longest = max((_chain(name) for name in MODULES), key=len)
    assert len(longest) <= MAX_DEPTH, " -> ".join(longest)


def test_no_module_is_over_400_lines() -> None:
    long = {
        name: lines
        for name, path in MODULES.items()
        # Counted as the before-stop hook counts: newlines plus one.
        if (lines := path.read_text(encoding="utf-8").count("\n") + 1) > MAX_LINES
    }
    assert long == {}


def test_sql_is_only_in_the_journal() -> None:
    calls = [
        f"{name}:{node.lineno}"
        for name in _outside("journal")
        for node in ast.walk(TREES[name])
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("execute", "executemany", "executescript")
    ]
    assert calls == []


def test_no_row_is_read_by_column_name_outside_the_journal() -> None:
    reads = [
        f"{name}:{node.lineno}"
        for name in _outside("journal")
        for node in ast.walk(TREES[name])
        if isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "row"
        and isinstance(node.slice, ast.Constant)
    ]
    assert reads == []


def test_the_journal_depends_on_nothing_above_it() -> None:
    above = {
        f"{name} imports {imported}"
        for name in MODULES
        if name.startswith("invoicectl.journal")
        for imported in IMPORTS[name]
        if not imported.startswith("invoicectl.journal") and imported not in _LEAVES
    }
    assert above == set()
    # The leaves it may import themselves import no more than errors.
    assert {imported for leaf in _LEAVES for imported in IMPORTS[leaf]} <= {"invoicectl.errors"}


# Modules below the journal: the errors, and where a journal lives (settings read it too).
_LEAVES = ("invoicectl.errors", "invoicectl.locations")


def test_only_the_lifecycle_writes_an_invoice_row() -> None:
    writes = [
        f"{name}:{node.lineno} {node.func.attr}"
        for name in _outside("lifecycle")
        if not name.startswith("invoicectl.journal")
        for node in ast.walk(TREES[name])
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("save", "insert_invoice", "insert_fresh")
    ]
    assert writes == []


def test_status_loads_neither_the_scanner_nor_lxml_nor_httpx(tmp_path: Path) -> None:
    """``status`` from cron pays only for what it uses: no XML parser, no HTTP client."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from invoicectl.cli import main\n"
        f"sys.argv = ['invoicectl', 'status', '--journal', {str(tmp_path / 'j.db')!r}]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = ('lxml', 'httpx', 'invoicectl.ubl', 'invoicectl.scan.reader')\n"
        "print(sorted(name for name in heavy if name in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr

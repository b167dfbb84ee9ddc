"""The package's layout (docs/design.md, Module layout): its rooms are stages of one data flow, and
imports run one way. Every import counts: at module level, inside functions (the lazy ones) and under
TYPE_CHECKING. tests/test_api.py guards which modules a command imports at start-up."""

import ast
from pathlib import Path

import spanfix

PACKAGE = Path(spanfix.__file__).parent

# The rooms, lowest first: a module may import its own room's modules and those of lower rooms only.
# Rooms of one rank (relabelling and timing, say) import neither each other.
RANKS = [
    ("_version", "runtime"),  # what every stage may use: the version; processes, limits, secrets hidden
    ("errors", "text"),  # spanfix's errors and safe text (both hide secrets: runtime/redact.py)
    ("sources",),  # where bytes live, both ways
    ("read",),  # the bytes in, the events decoded
    ("attribution",),  # who ran each step span: the front every command goes through
    ("relabelling", "timing", "options"),  # relabel's rooms; stats' measures; the API's options
    ("speculation", "tables"),  # does speculation pay (reads timing); the API's tables of rows
    ("runs",),  # several runs measured, and where the per-file work runs
    ("checking", "capturing"),  # the CI gate; profiling a live server, then its verdict
    ("render",),  # what people and CI read
    ("report",),  # the HTML report
    ("api",),  # the public API
    ("cli",),  # the commands
    ("console",),  # the console script
    ("__main__", ""),  # python -m spanfix, and the package's lazy public face
]
RANK = {room: rank for rank, rooms in enumerate(RANKS) for room in rooms}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()  # "" is the package itself; "timing.measure", ...


def _room(module: str) -> str:
    return module.split(".")[0]


def _imports(module: str, path: Path) -> set[str]:
    """Every module of the package this one imports: a module by name, or the package whose names it
    imports (its __init__)."""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    package = [part for part in package if part]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = []
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package[:len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
            base_name = ".".join(base)
            for alias in node.names:
                child = f"{base_name}.{alias.name}".lstrip(".")
                targets.append(child if child in MODULES else base_name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module] if isinstance(node, ast.ImportFrom) else [alias.name for alias in node.names]
            targets += [name.removeprefix("spanfix").lstrip(".") for name in names
                        if name and (name == "spanfix" or name.startswith("spanfix."))]
        found.update(targets)
    found.discard(module)
    return {name for name in found if name in MODULES}


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def test_every_module_is_in_a_room():
    assert {module for module in MODULES if _room(module) not in RANK} == set()
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= 10, top


def test_imports_run_one_way():
    """No module imports a room of a higher stage, nor a room of its own rank: timing and speculation
    read the attribution front, never relabel's rooms; the library never imports the API or the CLI."""
    upward = sorted(f"{module} imports {target}" for module, targets in GRAPH.items() for target in targets
                    if _room(target) != _room(module) and RANK[_room(target)] >= RANK[_room(module)])
    assert upward == []


def test_no_import_cycle():
    """Not even through a function's import or one made for type checking."""
    seen, on_path, cycles = set(), [], []

    def visit(module):
        if module in on_path:
            cycles.append(on_path[on_path.index(module):] + [module])
            return
        if module in seen:
            return
        seen.add(module)
        on_path.append(module)
        for target in sorted(GRAPH[module]):
            if target:  # the package's public face imports its API lazily, by name
                visit(target)
        on_path.pop()

    for module in sorted(MODULES):
        visit(module)
    assert cycles == []

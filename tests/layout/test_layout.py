"""The package's layout (docs/design.md, Module layout): its rooms are stages of one data flow, and
imports run one way. Every import counts: at module level, inside functions (the lazy ones) and under
TYPE_CHECKING. tests/api/test_api.py guards which modules a command imports at start-up."""

import ast
import functools
import subprocess
import sys
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
    ("trace",),  # one trace, read once: open() and Trace
    ("api",),  # the public API: several traces at once, and the public names
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


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each module's imports of the package, parsed when a test first asks (not at collection, which
    every pytest-xdist worker does: parsing the package took each of them a second)."""
    return {module: _imports(module, path) for module, path in MODULES.items()}


def test_every_module_is_in_a_room():
    assert {module for module in MODULES if _room(module) not in RANK} == set()
    top = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(top) <= 10, top


def test_imports_run_one_way():
    """No module imports a room of a higher stage, nor a room of its own rank: timing and speculation
    read the attribution front, never relabel's rooms; the library never imports the API or the CLI."""
    upward = sorted(f"{module} imports {target}" for module, targets in graph().items() for target in targets
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
        for target in sorted(graph()[module]):
            visit(target)
        on_path.pop()

    for module in sorted(MODULES):
        visit(module)
    assert cycles == []


MAX_FILE_LINES, MAX_FUNCTION_LINES = 500, 80  # docs/design.md: a module reads in one sitting, a function on a screen


def test_no_module_nor_function_is_too_long():
    """Every module of the package at most 500 lines, every function (a method, a nested one) at most 80,
    counted from its def (decorators aside) to its last line."""
    long_files, long_functions = [], []
    for module, path in sorted(MODULES.items()):
        text = path.read_text()
        if len(text.splitlines()) > MAX_FILE_LINES:
            long_files.append(f"{path.relative_to(PACKAGE)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}: {length} lines")
    assert long_files == []
    assert long_functions == []


TESTS = Path(__file__).resolve().parents[1]
# Test folders named for no one room: how work grows with the input, the package's layout, the seams'
# contract (every stage at once), and the trace generator the tests are built on.
NOT_ROOMS = {"growth", "layout", "contract", "generator"}


def test_every_test_file_sits_in_the_folder_of_the_room_it_guards():
    """docs/testing.md: tests/<room>/test_*.py, the folder named for a room of spanfix/ (or one of NOT_ROOMS);
    directly under tests/ only the helpers every folder imports. The names stay unique across folders: a
    test module is imported by its file name (pytest's default import mode, pyproject.toml's pythonpath)."""
    assert sorted(path.name for path in TESTS.glob("test_*.py")) == []
    files = sorted(TESTS.glob("*/test_*.py"))
    folders = {path.parent.name for path in files}
    assert sorted(folders - set(RANK) - NOT_ROOMS) == []
    assert NOT_ROOMS <= folders
    assert sorted(str(path.relative_to(TESTS)) for path in TESTS.glob("*/*/**/test_*.py")) == []
    names = [path.name for path in files]
    assert sorted({name for name in names if names.count(name) > 1}) == []


def test_an_xdist_group_runs_in_one_worker(tmp_path):
    """docs/testing.md: the Dask cluster and moto, the real SGLang servers, the browsers and the shared
    real-trace reads are kept to one worker by `xdist_group` marks, which `make test`'s `--dist loadgroup`
    honours. pytest 9.2 silently broke that (pytest-xdist#1386): every group went to both workers, each
    starting its servers again. A group of six, in a suite of its own, must run in one worker."""
    (tmp_path / "test_grouped.py").write_text(
        "import os, pytest\n"
        "@pytest.mark.xdist_group('together')\n"
        "@pytest.mark.parametrize('i', range(6))\n"
        "def test_grouped(i):\n"
        f"    open({str(tmp_path / 'workers')!r}, 'a').write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')\n"
        "@pytest.mark.parametrize('i', range(6))\n"
        "def test_free(i):\n"
        "    pass\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup", "-p",
                           "no:cacheprovider", "test_grouped.py"], cwd=tmp_path, capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:]
    workers = (tmp_path / "workers").read_text().split()
    assert len(workers) == 6 and len(set(workers)) == 1, workers

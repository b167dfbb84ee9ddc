"""Write the bytecode of spanfix and of the packages it runs on, once: `python -m spanfix.runtime.bytecode`
(the Makefile's install and bench/run.py run it).

An install with uv (which compiles nothing) or pip's --no-compile leaves bytecode to the first import,
but where PYTHONDONTWRITEBYTECODE is set (many container images, and the project's machine) no import
writes it, and every command compiled numpy, click, msgspec and rich again: relabel of a small
fixture took 0.25 s, 0.10 s with bytecode; stats 0.45 s, 0.18 s. About a second, for some 700
modules (not every installed package's 7,000). Exit status 1 when a module does not compile."""

from __future__ import annotations

import compileall
import importlib.util
import sys

# spanfix and what it imports as it runs (its dependencies in pyproject.toml, by module name).
RUNS_ON = ("spanfix", "click", "rich", "msgspec", "isal", "numpy", "re2", "orjson", "typing_extensions")


def sources() -> list[str]:
    """The folders of those packages, and the file of a one-file module (typing_extensions, and the
    finder an editable install imports at every start-up); those not installed are left out."""
    names = [*RUNS_ON, *(name for name in sys.modules if name.startswith("__editable__"))]
    found = []
    for spec in filter(None, map(importlib.util.find_spec, names)):
        if spec.submodule_search_locations:
            found += list(spec.submodule_search_locations)
        elif spec.origin and spec.origin.endswith(".py"):
            found.append(spec.origin)
    return found


def compile_all() -> bool:
    """Write what is missing or stale (compileall skips the rest); whether every module compiled."""
    ok = True
    for path in sources():
        if path.endswith(".py"):
            ok &= bool(compileall.compile_file(path, quiet=1))
        else:
            ok &= bool(compileall.compile_dir(path, quiet=1, workers=0))
    return ok


if __name__ == "__main__":
    sys.exit(0 if compile_all() else 1)

"""spanfix.runtime.bytecode: the install's step that writes the bytecode of spanfix and what it runs on
(where PYTHONDONTWRITEBYTECODE is set no import writes it, and every command compiled numpy again)."""

from __future__ import annotations

import importlib.util
import os
import sys

from spanfix.runtime import bytecode


def test_it_names_spanfix_and_the_packages_it_runs_on():
    found = bytecode.sources()
    for name in ("spanfix", "numpy", "click", "rich", "msgspec"):
        assert next(iter(importlib.util.find_spec(name).submodule_search_locations)) in found, name
    typing_extensions = importlib.util.find_spec("typing_extensions")
    assert typing_extensions is None or typing_extensions.origin in found  # a one-file module: its file


def test_it_writes_what_is_missing_and_says_when_a_module_does_not_compile(tmp_path, monkeypatch):
    package = tmp_path / "runs_on_me"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 1\n")
    (tmp_path / "one_file.py").write_text("ALSO = 2\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(bytecode, "RUNS_ON", ("runs_on_me", "one_file", "no_such_package_here"))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # as PYTHONDONTWRITEBYTECODE sets it
    assert bytecode.compile_all()
    assert os.path.exists(importlib.util.cache_from_source(str(package / "__init__.py")))
    assert os.path.exists(importlib.util.cache_from_source(str(tmp_path / "one_file.py")))
    (package / "broken.py").write_text("def (:\n")
    assert not bytecode.compile_all()

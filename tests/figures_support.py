"""What the cases of issue 21 (test_figures.py before it was filed by room) share across the
rooms they now sit in.

The cases' common ground, as the old file said it:

Figures a user can stand behind (issue 21, and the device clock of budgets, issue 20 item 5): no input
counted twice, budgets that can fail, rules not judged said to be skipped, unlike baselines named,
missing parts said, messages whole and on standard error, hints that decide, a README that runs."""

from __future__ import annotations

import json
from pathlib import Path

import synth
from click.testing import CliRunner
from conftest import FIXTURES

from spanfix.cli import main

EAGLE = FIXTURES / "eagle-stock.trace.json.gz"


def run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def _synth(path: Path, **spec) -> Path:
    synth.write(synth.generate(synth.SynthSpec(**spec)), path)
    return path


def _bare(tmp_path) -> Path:
    """eagle-stock without python frames, stage spans and scheduler.run_batch (as docs/check.md shows)."""
    import gzip
    document = json.loads(gzip.decompress(EAGLE.read_bytes()))
    document["traceEvents"] = [e for e in document["traceEvents"] if not (
        e.get("cat") == "python_function" or e.get("name") in ("draft", "draft_extend")
        or str(e.get("name", "")).startswith("scheduler."))]
    path = tmp_path / "eagle-bare.json"
    path.write_text(json.dumps(document))
    return path


"""What the commands write, digested, so that a change to the core can be proven to move nothing
(issue 41: relabel's bytes, `stats --format json`, `stats --kernels --device`, `inspect --json`,
`check --format json` and the verdict, byte for byte before and after).

    python bench/outputs.py record OUT.json [TRACE ...]   # default: fixtures/ and ../shared/traces
    python bench/outputs.py diff BEFORE.json AFTER.json

Run `record` once with the old code (a worktree of the old commit: `git worktree add /tmp/old
COMMIT`, then `PYTHONPATH=/tmp/old python bench/outputs.py record before.json`) and once with the
new, on the same traces, then `diff`. Each command runs as a user runs it, in its own process; a
relabelled trace is written to one fixed folder, so that the paths in the outputs are the same in
both records."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(tempfile.gettempdir()) / "spanfix-outputs"
SIDE_FILES = {"server_args.json", "server_info.json", "generate_outputs.json"}  # beside traces, not traces
COMMANDS = {
    "relabel": ["relabel", "{trace}", "-o", "{out}", "--json"],
    "relabel --annotate": ["relabel", "{trace}", "-o", "{out}", "--annotate", "--json"],
    "stats": ["stats", "{trace}", "--format", "json"],
    "stats --kernels --device": ["stats", "{trace}", "--kernels", "--device", "--format", "json"],
    "inspect": ["inspect", "{trace}", "--json"],
    "check": ["check", "{trace}", "--format", "json"],
}


def default_traces() -> list[Path]:
    shared = Path(os.environ.get("SPANFIX_SHARED_TRACES", ROOT.parent / "shared" / "traces"))
    found = [p for folder in (ROOT / "fixtures", shared) if folder.is_dir()
             for p in folder.rglob("*") if p.is_file() and (p.name.endswith(".json") or p.name.endswith(".json.gz"))
             and ".expected." not in p.name and "golden" not in p.parts and p.name not in SIDE_FILES]
    return sorted(found)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def record(target: str, traces: list[str]) -> None:
    OUT.mkdir(exist_ok=True)
    found: dict[str, dict[str, str]] = {}
    import spanfix  # the package the commands run, said: a record of the wrong code proves nothing
    print(f"spanfix from {Path(spanfix.__file__).parent}", file=sys.stderr)
    for number, trace in enumerate(traces):
        rows = found[trace] = {}
        for name, argv in COMMANDS.items():
            out = OUT / f"{number}{''.join(Path(trace).suffixes[-2:]) or '.json'}"
            out.unlink(missing_ok=True)
            args = [arg.format(trace=trace, out=out) for arg in argv]
            # Run from OUT: from a checkout, `-m spanfix` would import the checkout's package before
            # PYTHONPATH's, and the record of an old commit would be the new code's.
            done = subprocess.run([sys.executable, "-m", "spanfix", *args], capture_output=True, cwd=OUT,
                                  env={**os.environ, "COLUMNS": "200"}, check=False)
            rows[name] = f"exit {done.returncode} out {digest(done.stdout)} err {digest(done.stderr)}"
            if name.startswith("relabel"):
                rows[name] += f" file {digest(out.read_bytes()) if out.exists() else '-'}"
        print(f"{trace}: {len(rows)} commands", file=sys.stderr)
    Path(target).write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")


def diff(before: str, after: str) -> int:
    old, new = json.loads(Path(before).read_text()), json.loads(Path(after).read_text())
    moved = [f"{trace}: {name}: {rows.get(name)} -> {new.get(trace, {}).get(name)}"
             for trace, rows in old.items() for name in rows if new.get(trace, {}).get(name) != rows[name]]
    moved += [f"{trace}: only in {after}" for trace in new if trace not in old]
    print("\n".join(moved) if moved else f"nothing moved: {sum(map(len, old.values()))} outputs of {len(old)} traces")
    return 1 if moved else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "record":
        record(sys.argv[2], [str(Path(p).resolve()) for p in sys.argv[3:]] or [str(p) for p in default_traces()])
    elif len(sys.argv) == 4 and sys.argv[1] == "diff":
        sys.exit(diff(sys.argv[2], sys.argv[3]))
    else:
        sys.exit(__doc__)

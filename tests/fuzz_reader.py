"""A bounded fuzz run of the reader and the commands over mutated real traces (`make fuzz`, not `make test`).

Seeds are the real captures in ../shared/traces (large ones cut to a window of their first events,
byte for byte) and the bundled speculative fixtures, whose step spans get renamed. Each case
mutates a seed at the byte level (bit flips, truncation, insertions, deletions), the JSON level
(odd values, duplicate keys, step names, container forms), the gzip level, and with what issue 12
found: markup and control characters in names, thread names and file names, lone surrogate
escapes, long names that make regular expressions backtrack, spans nested thousands deep,
identical or partially overlapping by the thousand, External ids shared by several step spans.
Then it runs relabel_file on it, and on some cases a command of the CLI (relabel, inspect, stats,
check, in every format). Every case must end in one of two ways:

- a relabelled output that spanfix can read back, with as many events as the input; when nothing
  was renamed, the very bytes of the input;
- TraceError or OutputError, whose message is one line starting with the file's path;

and a command must exit 0, 1 or 2, with no traceback or internal error, machine output that parses
and output bounded by the input's size. Issue 22 added the surfaces that came after: the report
(its page must hold a payload that parses and no early `</script`), the Python API (open from bytes,
every method, relabel, close, each ending in a result or a SpanfixError), baselines (the case
itself, a mutated saved stats result, a gzip of zeros), the device view (launches and kernels with
times that overflow, hostile kernel names), CSV (no cell a spreadsheet reads as a formula) and CI
output (under GITHUB_ACTIONS no line starts a workflow command or holds "##["); every JSON must be
RFC 8259 (no NaN or Infinity), and no input or baseline may change. Anything else is a crash: its
input and traceback are saved for replay. Time is checked too: a case whose CPU time per input byte is far above the median of
the run's cases of its kind (relabel alone, or with the command or API call it also ran) is run again, and if it stays slow it is a finding (saved under slow/), as a
quadratic cost would be. Exit status 1 if there is a crash or a finding.

    python tests/fuzz_reader.py [--seconds 60] [--seed N] [--save-crashes build/fuzz-crashes] [--halves]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gzip
import hashlib
import io
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile

from spanfix.attribution.analyse import RelabelOptions
from spanfix.attribution.index import indexed_name
from spanfix.cli import main as cli
from spanfix.errors import OutputError
from spanfix.read import document, parts
from spanfix.read.reader import TraceError, located_names, read_trace
from spanfix.relabelling.write import relabel_file

ROOT = Path(__file__).resolve().parents[1]
SHARED_TRACES = Path(os.environ.get("SPANFIX_SHARED_TRACES", ROOT.parent / "shared" / "traces"))
WINDOW_BYTES = 2 * 2**20  # larger seeds are cut to about this much: a case should take milliseconds

STEP_NAMES = [b"step[TARGET_VERIFY bs=2]", b"step[DECODE bs=4]", b"step[EXTEND bs=3 toks=30]",
              b"step[DRAFT_EXTEND_V2 bs=2 c_sq=5 c_sqsq=13 c_sqsk=93 c_sk=35]", b"step[DRAFT_LOOP raw_bs=3 bs=4 topk=4]",
              b"step[VERIFY bs=2]", b"step[decode bs=4]", b"\\u0073tep[TARGET_VERIFY bs=1]", b"step\\u005bDECODE bs=1]",
              b"step[", b"step[]", b"step[TARGET_VERIFY", b"step[ bs=1]", b"step[TARGET_VERIFY bs=2 \xff\xfe]"]
ODD_VALUES = [b"5", b"-1", b"null", b"true", b'"x"', b"[]", b"{}", b"1" + b"0" * 30, b"1" + b"0" * 400, b"1e400",
              b"1.7e308", b"-1.7e308", b"1e60", b"9.3e18", b"9223372036854775807",
              b"-0.0", b"NaN", b"Infinity", b"[" * 3000 + b"]" * 3000, b'"\\ud800"', b'"\x01"', b'"\xff"',
              b'"draft worker"', b'{"name": "draft"}', b'{"External id": 1}', b"12345678901234567.125"]
INSERTS = [b'"', b"{", b"}", b"[", b"]", b",", b":", b"\\", b"\\u", b"\x00", b"\x01", b"\t", b"\xff", b"\xc3",
           b"\xef\xbb\xbf", b"NaN", b" ", b'"name": "step[TARGET_VERIFY bs=1]", ', b'{"ph": "E"},', b"},{"]
FIELD = re.compile(rb'"(name|ph|ts|dur|pid|tid|cat|args|traceEvents|External id|Python id)"\s*:\s*')
VALUE = re.compile(rb'"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null|[\[{]', re.DOTALL)


# --- seeds -------------------------------------------------------------------------------------------

def seeds() -> list[tuple[str, bytes]]:
    paths = []
    if SHARED_TRACES.is_dir():
        paths += sorted(p for p in SHARED_TRACES.rglob("*") if p.is_file() and p.suffix in (".json", ".gz"))
    paths += sorted((ROOT / "fixtures").glob("*.trace.json*"))
    found = []
    for path in paths:
        data = path.read_bytes()
        plain = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
        found.append((path.name, plain if len(plain) <= WINDOW_BYTES else window(plain)))
    return found


def window(plain: bytes) -> bytes:
    """The document cut after the event that crosses WINDOW_BYTES, its array and object closed
    again: real bytes throughout, only fewer events."""
    start = plain.find(b"[", plain.find(b'"traceEvents"') + 1 if plain.lstrip()[:1] == b"{" else 0)
    decoder = json.JSONDecoder()
    text = plain.decode("utf-8", "surrogateescape")  # byte offsets equal character offsets only for ASCII
    position = start + 1
    while position < WINDOW_BYTES:
        while text[position] in " \t\r\n,":
            position += 1
        if text[position] == "]":
            break
        _, position = decoder.raw_decode(text, position)
    head = text[:position].encode("utf-8", "surrogateescape")
    return head + (b"\n]}\n" if plain.lstrip()[:1] == b"{" else b"\n]\n")


# --- mutations -----------------------------------------------------------------------------------------

def flip_bits(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[:rng.randrange(len(data) + 1)]


def insert(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    piece = rng.choice(INSERTS) if rng.random() < 0.8 else rng.randbytes(rng.randint(1, 16))
    return data[:at] + piece + data[at:]


def delete(rng: random.Random, data: bytes) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + data[at + rng.randint(1, 64):]


def duplicate(rng: random.Random, data: bytes) -> bytes:
    at, to = rng.randrange(len(data) + 1), rng.randrange(len(data) + 1)
    return data[:to] + data[at:at + rng.randint(1, 400)] + data[to:]


def _some_field(rng: random.Random, data: bytes) -> re.Match | None:
    # Jump to a random place and take the next field from there: cheap on megabytes of text.
    return FIELD.search(data, rng.randrange(len(data) + 1)) or FIELD.search(data)


def odd_value(rng: random.Random, data: bytes) -> bytes:
    field = _some_field(rng, data)
    value = field and VALUE.match(data, field.end())
    if not value:
        return insert(rng, data)
    end = value.end()
    if value.group() in (b"[", b"{"):  # replace only the opening bracket's content up to a close
        end = data.find(b"]" if value.group() == b"[" else b"}", end) + 1 or end
    return data[:value.start()] + rng.choice(ODD_VALUES) + data[end:]


def step_name(rng: random.Random, data: bytes) -> bytes:
    field = _some_field(rng, data)
    if not field or field.group(1) != b"name" or data[field.end():field.end() + 1] != b'"':
        return data
    value = VALUE.match(data, field.end())
    return data[:value.start()] + b'"' + rng.choice(STEP_NAMES) + b'"' + data[value.end():] if value else data


def duplicate_key(rng: random.Random, data: bytes) -> bytes:
    at = data.find(b"{", rng.randrange(len(data) + 1))
    if at < 0:
        return data
    key = rng.choice([b'"name": "step[TARGET_VERIFY bs=2]", ', b'"name": 7, ', b'"ph": "X", ', b'"ts": "soon", ',
                      b'"traceEvents": [], ', b'"args": {"name": "draft"}, ', b'"tid": 2, '])
    return data[:at + 1] + key + data[at + 1:]


def container(rng: random.Random, data: bytes) -> bytes:
    stripped = data.rstrip()
    return rng.choice([
        stripped.rstrip(b"}").rstrip().rstrip(b"]"),  # the array left open, as a killed writer leaves it
        stripped.rstrip(b"}").rstrip().rstrip(b"]") + b",\n",
        b"\xef\xbb\xbf" + data,
        data + bytes(rng.randint(1, 300)),
        data + b"\n" + data,
        b"  \n" + data,
        data.replace(b"\n", b"\r\n"),
    ])


# --- issue 12: hostile but valid -------------------------------------------------------------------------

def _events_start(data: bytes) -> int | None:
    """Just after the "[" that opens the events array, where events can be put in."""
    if data.lstrip()[:1] == b"[":
        return data.index(b"[") + 1
    found = re.search(rb'"traceEvents"\s*:\s*\[', data)
    return found.end() if found else None


def _json_text(rng: random.Random) -> str:
    """A string value as markup, code, control characters or a lone surrogate would make it."""
    pieces = [*hostile.MARKUP, *CI_AND_SPREADSHEET, "\udc80", "\ud83d", "[", "]", "\u00e9", "draft",
              "step[TARGET_VERIFY bs=1 "]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(1, 4)))


# Issue 22: what a CI log, a spreadsheet or Plotly reads as a command, a formula or markup.
CI_AND_SPREADSHEET = ["::error file=x::forged", "\n::warning::x", "##[error]forged", "##vso[task.setvariable]x",
                      "::stop-commands::t", '=HYPERLINK("http://x")', "+1", "-2", "@SUM(1)", "\tx",
                      '<a href="https://x">click</a>', "<b>b</b><br>"]


def _escaped(text: str) -> bytes:
    # json.dumps writes a lone surrogate as its \u escape: valid JSON, refused by some readers.
    return json.dumps(text).encode()


def hostile_string(rng: random.Random, data: bytes) -> bytes:
    """Markup, control characters or lone surrogates in a name, a thread name or another string."""
    found = None
    for _ in range(8):
        field = _some_field(rng, data)
        if field and data[field.end():field.end() + 1] == b'"':
            found = field
            break
    if found is None:
        return insert(rng, data)
    value = VALUE.match(data, found.end())
    if not value:
        return data
    text = _json_text(rng)
    if found.group(1) == b"name" and rng.random() < 0.5:
        text = f"step[TARGET_VERIFY bs=1 {text}]"
    return data[:value.start()] + _escaped(text) + data[value.end():]


def hostile_events(rng: random.Random, data: bytes) -> bytes:
    """A few hundred to a few thousand events of one of the shapes that cost the square of their
    number to a careless reader (tests/hostile.py), put at the start of the events array."""
    at = _events_start(data)
    if at is None:
        return data
    n = rng.choice([50, 300, 2000, 5000])
    make = rng.choice([*hostile.GROWING.values(), *hostile.LONG_NAMES.values()])
    made = make(n * 10 if make in hostile.LONG_NAMES.values() else n)
    events = made[made.index(b"[") + 1:made.rindex(b"]")]
    rest = data[at:].lstrip()
    return data[:at] + events + (b"," if rest[:1] not in (b"]", b"") else b"") + data[at:]


def shared_external_id(rng: random.Random, data: bytes) -> bytes:
    """Step spans on two tracks and GPU copies far apart, all with one External id."""
    at = _events_start(data)
    if at is None:
        return data
    eid = rng.choice([0, 1, 7, 10**30])
    events = [hostile.x(hostile.VERIFY, 10, 5, tid=2, External_id=eid), hostile.x(hostile.VERIFY, 20, 5, External_id=eid),
              hostile.x(hostile.VERIFY, 10, 5, pid=0, tid=7, cat="gpu_user_annotation", External_id=eid),
              hostile.x(hostile.VERIFY, 800_000, 5, pid=0, tid=7, cat="gpu_user_annotation", External_id=eid)]
    body = b",".join(json.dumps(event).encode() for event in events)
    rest = data[at:].lstrip()
    return data[:at] + body + (b"," if rest[:1] not in (b"]", b"") else b"") + data[at:]


def device_work(rng: random.Random, data: bytes) -> bytes:
    """A step span with launches and their kernels (the device view), some with times whose end
    overflows or reaches past 64 bits, and kernel names that hold markup, formulas or CI commands."""
    at = _events_start(data)
    if at is None:
        return data
    events = [hostile.x(hostile.VERIFY, 10, 500, tid=1), hostile.DRAFT_THREAD]
    for k in range(rng.randint(1, 6)):
        ts, dur = rng.choice([(20 + k, 5), (1.7e308, 1.7e308), (30, 1e60), (9e18, 9e18), (-1e308, 5), (40, -3)])
        name = rng.choice(["gemm_kernel", "flash_attn", *CI_AND_SPREADSHEET, "a" * 40 + "!"])
        events += [hostile.x("cudaLaunchKernel", 11 + k, 1, cat="cuda_runtime", correlation=100 + k),
                   hostile.x(name, ts, dur, pid=0, tid=7, cat=rng.choice(["kernel", "gpu_memcpy"]), correlation=100 + k)]
    body = b",".join(json.dumps(event).encode() for event in events)
    rest = data[at:].lstrip()
    return data[:at] + body + (b"," if rest[:1] not in (b"]", b"") else b"") + data[at:]


TEXT_MUTATIONS = [flip_bits, truncate, insert, delete, duplicate, odd_value, odd_value, step_name, step_name,
                  duplicate_key, container, hostile_string, hostile_string, hostile_events, shared_external_id,
                  device_work]


def gzip_level(rng: random.Random, data: bytes) -> bytes:
    packed = gzip.compress(data, compresslevel=rng.choice([1, 6, 9]), mtime=0)
    choice = rng.randrange(8)
    if choice == 0:
        return flip_bits(rng, packed)
    if choice == 1:
        return packed[:rng.randrange(len(packed))]
    if choice == 2:
        return packed + rng.choice([bytes(rng.randint(1, 64)), b"garbage", packed, gzip.compress(b"")])
    if choice == 3:  # two members, split anywhere
        cut = rng.randrange(len(data) + 1)
        return gzip.compress(data[:cut], mtime=0) + gzip.compress(data[cut:], mtime=0)
    if choice == 4:
        return packed[:-8] + bytes(8)  # wrong CRC and length
    return packed


def mutate(rng: random.Random, seed: bytes) -> bytes:
    data = seed
    for _ in range(rng.choice([0, 1, 1, 1, 2, 3])):
        data = rng.choice(TEXT_MUTATIONS)(rng, data)
    return gzip_level(rng, data) if rng.random() < 0.4 else data


# --- running a case ----------------------------------------------------------------------------------------

class Crash(Exception):
    """A case ended some way other than the two allowed."""


def halves_agree(source: Path) -> None:
    """The input read whole by one process, then mapped and read in chunks by several: large traces
    take the second way, and it must give exactly what the first gives, errors included."""
    def view():
        try:
            trace = read_trace(str(source), select=indexed_name)
        except TraceError as exc:
            return str(exc)
        return len(trace.events), list(trace.events.selected()), located_names(trace), trace.warnings

    defaults = parts.FORK_BYTES, parts.CHUNK_BYTES, document.MAP_BYTES
    try:
        parts.FORK_BYTES = parts.CHUNK_BYTES = document.MAP_BYTES = 2**62
        whole = view()
        parts.FORK_BYTES = document.MAP_BYTES = 0
        parts.CHUNK_BYTES = max(1024, source.stat().st_size // 5)
        halves = view()
    finally:
        parts.FORK_BYTES, parts.CHUNK_BYTES, document.MAP_BYTES = defaults
    if halves != whole:
        raise Crash(f"read in chunks, the trace differs from the trace read whole: {str(halves)[:200]}")


FILE_NAMES = ["case", "d[/]case", "case [bold]x[/bold]", "case\x1b[31m", "case\nline", "=cmd()", "case <b>|x|", ":smile:",
              "::error file=x::case", "##[error]case", "\t+case", '<a href="https://x">click</a>', "case\udcff\udcfe"]
COMMANDS = [["relabel", "--json"], ["relabel", "--dry-run"], ["relabel", "--annotate", "--strict"], ["inspect"],
            ["inspect", "--json"], ["stats", "--by", "name", "--by", "file"], ["stats", "--format", "json", "--by", "bs"],
            ["stats", "--format", "csv", "--by", "name"], ["stats", "--format", "markdown", "--by", "rank"],
            ["stats", "--kernels", "--format", "json"], ["stats", "--device", "--kernels", "--by", "rank,file"],
            ["check"], ["check", "--format", "junit"], ["check", "--format", "markdown"], ["check", "--format", "json"],
            ["stats", "--kernels", "--format", "csv", "--by", "file"], ["stats", "--device", "--format", "json"],
            ["report"], ["stats", "--baseline"], ["check", "--baseline"], ["report", "--baseline"]]
OUTPUT_PER_INPUT_BYTE = 40  # a report may be larger than its trace, by a bounded factor: never by its square
OUTPUT_ALLOWANCE = 2**20


def plain_size(data: bytes) -> int:
    """The input's size uncompressed: what reports and time are measured against."""
    if data[:2] != b"\x1f\x8b":
        return len(data)
    try:
        return len(gzip.decompress(data))
    except (OSError, EOFError, gzip.zlib.error):
        return len(data)


def baseline_for(rng: random.Random, source: Path, folder: Path) -> Path:
    """A baseline for --baseline: the case itself, a saved stats result mutated, or a gzip of zeros."""
    choice = rng.randrange(4)
    if choice == 0:
        return source
    path = folder / ("base.json.gz" if choice == 3 else "base.json")
    if choice == 3:
        path.write_bytes(gzip.compress(bytes(rng.choice([10, 2**20, 2**24])), mtime=0))
        return path
    saved = {"by": ["stage"], "stages": [{"stage": "VERIFY", "clock": "cpu", "count": 40, "mean_us": 230.0},
                                         {"stage": "DRAFT", "clock": "gpu", "count": 40, "mean_us": 60.0}],
             "iterations": [{"clock": "cpu", "count": 30, "mean_us": 450.0, "parts": [{"part": "draft", "mean_us": 1}]}]}
    text = json.dumps(saved).encode()
    for _ in range(rng.randint(0, 3)):
        text = odd_value(rng, text) if rng.random() < 0.7 else rng.choice(TEXT_MUTATIONS[:5])(rng, text)
    path.write_bytes(text)
    return path


FORMULA = ("=", "+", "-", "@", "\t", "\r")
EXTRA_BYTES = [0]  # bytes a case reads beyond its input (a baseline), counted in its expected time
WORK: list[str] = []  # what a case ran besides relabel (a command, the API): its time is compared with its kind's
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def strict_json(text: str) -> object:
    """RFC 8259 JSON: NaN and Infinity, which Python's json reads by default, are no JSON."""
    def refuse(constant: str):
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def check_ci_lines(command: list[str], said: str) -> None:
    for line in re.split(r"[\r\n]", said):
        ours = re.match(r"::(error|warning) title=spanfix check::", line) is not None
        if (line.lstrip().startswith("::") and not ours) or "##[" in line or "##vso[" in line:
            raise Crash(f"{' '.join(command)}: a workflow command in CI output: {line[:120]!r}")


def run_command(rng: random.Random, source: Path, folder: Path) -> str:
    """One command of the CLI on the case, in this process: exit 0, 1 or 2, no traceback, machine
    output that parses, output bounded by the input's size, safe in CI, and nothing it read changed."""
    command = list(rng.choice(COMMANDS))
    WORK.append(command[0])
    if command[0] == "relabel" and "--dry-run" not in command:
        command = [*command, "-o", str(folder / "cli-out.json")]
    read = [source]
    if command[-1] == "--baseline":
        read.append(baseline_for(rng, source, folder))
        command.append(str(read[-1]))
        EXTRA_BYTES[0] += plain_size(read[-1].read_bytes())  # a second trace to read: the case's time allows it
    if command[0] == "report":
        command += ["-o", str(folder / "report.html")]
    before = {path: path.read_bytes() for path in read}
    ci = rng.choice(["true", ""])
    result = CliRunner().invoke(cli, [*command, str(source)], env={"GITHUB_ACTIONS": ci})
    said = result.stdout + result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise Crash(f"{' '.join(command)}: {type(result.exception).__name__}: {result.exception}") from result.exception
    if result.exit_code not in (0, 1, 2) or "Traceback" in said or "internal error" in said:
        raise Crash(f"{' '.join(command)}: exit {result.exit_code}: {said[-300:]!r}")
    if result.exit_code == 1 and command[0] not in ("check",) and "--strict" not in command:
        raise Crash(f"{' '.join(command)}: exit 1 without a check")
    if any(path.read_bytes() != data for path, data in before.items()):
        raise Crash(f"{' '.join(command)}: an input or the baseline was changed")
    size = plain_size(source.read_bytes())
    if len(said) > OUTPUT_PER_INPUT_BYTE * size + OUTPUT_ALLOWANCE:
        raise Crash(f"{' '.join(command)}: {len(said)} bytes of output for {size} bytes of input")
    if any(ord(c) < 32 and c not in "\n" for c in result.stderr):
        raise Crash(f"{' '.join(command)}: a raw control character on standard error")
    if ci:
        check_ci_lines(command, said)
    if result.exit_code != 2 or result.stdout.strip():
        try:
            if "json" in command or "--json" in command:
                strict_json(result.stdout)
            elif "junit" in command:
                ET.fromstring(result.stdout)
            elif "csv" in command:
                for row in csv.reader(io.StringIO(result.stdout)):
                    bad = [cell for cell in row if cell.startswith(FORMULA) and not _NUMBER.fullmatch(cell)]
                    if bad:
                        raise Crash(f"{' '.join(command)}: a CSV cell a spreadsheet reads as a formula: {bad[0]!r}")
        except ValueError as exc:
            raise Crash(f"{' '.join(command)}: machine output that does not parse: {exc}") from None
        except ET.ParseError as exc:
            raise Crash(f"{' '.join(command)}: JUnit XML that does not parse: {exc}") from None
    if command[0] == "report" and (folder / "report.html").exists():
        check_report((folder / "report.html").read_text("utf-8", "replace"), command)
    return f"cli exit {result.exit_code}"


def check_report(page: str, command: list[str]) -> None:
    """The page's payload parses as RFC 8259 JSON and nothing in it can end its script early."""
    found = re.search(r'<script type="application/json" id="spanfix-data">(.*?)</script>', page, re.DOTALL)
    if found is None:
        raise Crash(f"{' '.join(command)}: a report without its payload")
    if "<" in found.group(1):
        raise Crash(f"{' '.join(command)}: a raw < in the report's payload")
    try:
        strict_json(found.group(1))
    except ValueError as exc:
        raise Crash(f"{' '.join(command)}: a report payload that does not parse: {exc}") from None


API_BYTES = 256 * 1024  # Trace.relabel() after open() finds the names' bytes by the exact tokenizer: 2 us a byte


def run_api(rng: random.Random, data: bytes, folder: Path) -> str:
    """The Python API on the case's bytes: open, every method, relabel to a file, close; each ends in
    a result whose JSON is RFC 8259, or in a SpanfixError of one line."""
    import spanfix
    from spanfix.text import dumps

    WORK.append("api")

    try:
        trace = spanfix.open(data, name="case.json", kernel_names=rng.random() < 0.5)
    except spanfix.SpanfixError as exc:
        if "\n" in str(exc):
            raise Crash(f"api: an error of several lines: {exc!r}") from None
        return "api error"
    except Exception as exc:
        raise Crash(f"api open: {type(exc).__name__}: {exc}") from exc
    try:
        for call in (lambda: trace.stats(by=rng.choice([(), ("name",), ("bs",)]), kernels=rng.random() < 0.5).to_json(),
                     lambda: trace.inspect().to_json(), lambda: trace.relabel_plan().to_json(),
                     lambda: [step.cpu_us for step in trace.steps()], lambda: len(trace.iterations()),
                     lambda: trace.warnings, lambda: trace.relabel(str(folder / "api-out.json")).to_json()):
            try:
                value = call()
            except spanfix.SpanfixError:
                continue
            strict_json(dumps(value).decode())
        trace.close()
        try:
            trace.stats()
        except spanfix.UsageError:
            pass
        else:
            raise Crash("api: a closed Trace still answered")
    except Crash:
        raise
    except Exception as exc:
        raise Crash(f"api: {type(exc).__name__}: {exc}") from exc
    return "api ok"


def run_case(rng: random.Random, data: bytes, folder: Path, *, halves: bool = False, commands: float = 0.0) -> str:
    """Relabel one mutated input (and with probability `commands` run a CLI command on it too);
    return the outcome's kind, or raise Crash."""
    gz = data[:2] == b"\x1f\x8b"
    stem = rng.choice(FILE_NAMES) if rng.random() < 0.2 else "case"
    source = folder / (f"{stem}.json.gz" if gz else f"{stem}.json")
    target = folder / ("out.json.gz" if gz else "out.json")
    source.parent.mkdir(parents=True, exist_ok=True)  # "d[/]case": a file name can hold no "/", a path can
    source.write_bytes(data)
    if rng.random() < commands:
        run_command(rng, source, folder)
    if rng.random() < commands / 2 and len(data) <= API_BYTES:
        run_api(rng, data, folder)
    if halves:
        halves_agree(source)
    options = RelabelOptions(algorithm=rng.choice([None, None, "eagle", "dflash", "mtp", "frozen-kv"]),
                             annotate=rng.random() < 0.1)
    try:
        result = relabel_file(str(source), str(target), options)
    except (TraceError, OutputError) as exc:
        message = str(exc)
        named = str(source if isinstance(exc, TraceError) else target)
        # One line, but for the file's own name, which may hold anything (the CLI prints it escaped).
        if not message.startswith(f"{named}: ") or "\n" in message[len(named):]:
            raise Crash(f"{type(exc).__name__} not one line naming the file: {message!r}") from None
        return "error: " + re.sub(r"\d+", "N", message[len(named) + 2:].split(" near ")[0])[:80]
    except Exception as exc:
        raise Crash(f"{type(exc).__name__}: {exc}") from exc
    if source.read_bytes() != data:
        raise Crash("the input was changed")
    written = target.read_bytes()
    if result.changed == 0 and not options.annotate and written != data:
        raise Crash("nothing was renamed, yet the output differs from the input")
    try:
        events_out = len(read_trace(str(target)).events)
    except TraceError as exc:
        raise Crash(f"relabel wrote a trace it cannot read back: {exc}") from None
    if events_out != len(read_trace(str(source)).events):
        raise Crash("the output has another number of events than the input")
    size = plain_size(data)
    if plain_size(written) > 2 * size + OUTPUT_ALLOWANCE:
        raise Crash(f"an output of {len(written)} bytes for {size} bytes of input")
    if len(json.dumps(result.to_json(), default=str)) > OUTPUT_PER_INPUT_BYTE * size + OUTPUT_ALLOWANCE:
        raise Crash("a summary far larger than the input")
    return "relabelled" if result.changed else "unchanged"


def save_crash(folder: Path, data: bytes, report: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / hashlib.sha1(data).hexdigest()[:12]
    stem.with_suffix(".input").write_bytes(data)
    stem.with_suffix(".txt").write_text(report)
    return stem.with_suffix(".input")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60, help="how long to run (default 60)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: a new one, printed)")
    parser.add_argument("--save-crashes", type=Path, default=ROOT / "build" / "fuzz-crashes",
                        help="where crashing (and slow) inputs and their tracebacks go")
    parser.add_argument("--slow", type=float, default=2.0, help="save cases slower than this many seconds")
    parser.add_argument("--halves", action="store_true",
                        help="also read each case in two halves (as large traces are) and compare")
    parser.add_argument("--commands", type=float, default=0.3,
                        help="the share of cases also run through a CLI command (default 0.3)")
    parser.add_argument("--slow-factor", type=float, default=30.0,
                        help="a case whose CPU time per byte is this many times the median is a finding")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    pool = seeds()
    if not pool:
        print(f"no seed traces: {SHARED_TRACES} and fixtures/ are empty", file=sys.stderr)
        return 2
    print(f"fuzzing reader + relabel for {args.seconds:g} s, seed {seed}, {len(pool)} seed traces")
    outcomes: Counter = Counter()
    crashes: Counter = Counter()
    saved: list[Path] = []
    slow: list[Path] = []
    slowest = (0.0, "")
    timings: list[tuple] = []  # (CPU seconds, input bytes, input, seed trace, case seed, kind of case)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="spanfix-fuzz-") as temporary:
        folder = Path(temporary)

        def one(data: bytes, case_seed: int) -> None:
            try:
                outcomes[run_case(random.Random(case_seed), data, folder, halves=args.halves,
                                  commands=args.commands)] += 1
            finally:
                for leftover in folder.iterdir():
                    shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()

        while time.monotonic() - started < args.seconds:
            name, plain = rng.choice(pool)
            data = mutate(rng, plain)
            case_seed = rng.randrange(2**32)
            began, cpu = time.monotonic(), time.process_time()
            EXTRA_BYTES[0] = 0
            WORK.clear()
            try:
                one(data, case_seed)
            except Crash as crash:
                crashes[str(crash)[:160]] += 1
                report = f"seed trace {name}, run seed {seed}\n{crash}\n" + "".join(traceback.format_exception(crash))
                saved.append(save_crash(args.save_crashes, data, report))
            took = time.monotonic() - began
            timings.append((time.process_time() - cpu, plain_size(data) + EXTRA_BYTES[0], data, name, case_seed,
                            work_of(WORK)))
            slowest = max(slowest, (took, name))
            if took > args.slow:
                slow.append(save_crash(args.save_crashes / "slow", data, f"seed trace {name}: {took:.2f} s\n"))
        per_byte = _median_per_byte(timings)
        findings = _slow_per_byte(timings, args.slow_factor, one)
        for seconds, size, data, name in findings:
            slow.append(save_crash(args.save_crashes / "slow", data,
                                   f"seed trace {name}: {seconds:.2f} s of CPU for {size} bytes\n"))
    cases = sum(outcomes.values()) + sum(crashes.values())
    print(f"{cases} cases in {time.monotonic() - started:.0f} s; slowest {slowest[0]:.2f} s (from {slowest[1]}); "
          f"median CPU time {per_byte * 1e9:.0f} ns per input byte (inputs of 256 kB or more)")
    for kind, count in outcomes.most_common():
        print(f"  {count:7d}  {kind}")
    print(f"crashes: {sum(crashes.values())}")
    for kind, count in crashes.most_common():
        print(f"  {count:7d}  {kind}")
    for path in saved[:10]:
        print(f"  saved {path}")
    print(f"slower than {args.slow:g} s: {len(slow) - len(findings)}; far slower per byte than the median, twice: "
          f"{len(findings)}" + (f" (saved in {slow[0].parent})" if slow else ""))
    return 1 if crashes or findings else 0


CASE_SECONDS = 0.3  # a case's own fixed cost (a command's start, rendering), allowed on top of its bytes' cost


def work_of(work: list[str]) -> str:
    """A case's kind: relabel alone, or with the command or API it ran too (a report costs more per
    byte than a relabel, linearly: comparing the two would call every report slow)."""
    return "+".join(["relabel", *sorted(work)])


MIN_KIND_CASES = 3  # large cases of a kind before its own median is trusted; else the slowest kind's


def _median_per_byte(timings: list) -> float:
    """The run's typical CPU time per input byte, on inputs large enough for their bytes to dominate."""
    large = [seconds / size for seconds, size, *_ in timings if size >= 256 * 1024] or \
        [seconds / max(size, 1) for seconds, size, *_ in timings]
    return statistics.median(large) if large else 0.0


def _per_byte_by_kind(timings: list) -> dict[str, float]:
    """Each kind of case's median CPU time per byte; a kind with too few large cases gets the highest
    of the kinds that have enough (so that a rare command is not judged by relabel's cost alone)."""
    kinds: dict[str, list] = {}
    for timing in timings:
        kinds.setdefault(timing[5], []).append(timing)
    medians = {kind: _median_per_byte(cases) for kind, cases in kinds.items()
               if sum(size >= 256 * 1024 for _, size, *_ in cases) >= MIN_KIND_CASES}
    fallback = max(medians.values(), default=_median_per_byte(timings))
    return {kind: medians.get(kind, fallback) for kind in kinds}


def _slow_per_byte(timings: list, factor: float, again) -> list[tuple[float, int, bytes, str]]:
    """Cases that took more than CASE_SECONDS plus factor times what their kind's median per byte
    predicts for their size, measured a second time so that a pause of the machine is not mistaken
    for a quadratic cost. Twenty at most, the worst first."""
    per_byte = _per_byte_by_kind(timings)

    def over(seconds: float, size: int, kind: str) -> float:
        return seconds - CASE_SECONDS - factor * per_byte[kind] * size

    found = []
    worst = sorted(timings, key=lambda t: over(t[0], t[1], t[5]), reverse=True)[:20]
    for seconds, size, data, name, case_seed, kind in worst:
        if over(seconds, size, kind) <= 0:
            break
        cpu = time.process_time()
        with contextlib.suppress(Crash):
            again(data, case_seed)
        seconds = time.process_time() - cpu
        if over(seconds, size, kind) > 0:
            found.append((seconds, size, data, f"{name} ({kind})"))
    return found


if __name__ == "__main__":
    sys.exit(main())

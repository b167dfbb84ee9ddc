"""SGLang's own sweep, beside the traces: `scripts/playground/bench_speculative.py` launches a server
per configuration (always `--speculative-algorithm EAGLE`; steps, topk and draft tokens all 0 is the
same server without speculation), sends one batch of requests at a time and appends one JSON line
per configuration to its `--output` file:

    {"batch_size": 4, "steps": 3, "topk": 1, "num_draft_tokens": 4, "acc_length": 2.61,
     "step_time": 0.00712, "speed": 366.6, "completion_tokens": 512.0}

`acc_length` is bench_serving's accept length (1.0 when the server reports none), `step_time` the
20th percentile of `/get_server_info`'s `step_time_dict[str(batch_size)]` in seconds (the server's
decode step at that batch size, recorded with SGLANG_RECORD_STEP_TIME=1), `speed` = `acc_length /
step_time`: tokens per second of one request, and `completion_tokens` the mean output tokens per
request. Read from sgl-project/sglang's scripts/playground/bench_speculative.py.

A line is matched to a run by the run's settings (steps, topk, draft tokens; plain decoding to 0, 0,
0) and to one of its rows by its batch size. A line that matches no run, or several, is kept with
why, never dropped. A line whose figures no run can have (an accept length below 1 or above its draft
tokens, a time that is no positive number) is left out, with a note naming it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import orjson

from ..errors import TraceError
from ..read.side import SideFile

FIELDS = ("batch_size", "steps", "topk", "num_draft_tokens", "acc_length", "step_time", "speed", "completion_tokens")
WHOLE = ("batch_size", "steps", "topk", "num_draft_tokens")  # what a line is matched by
PLAIN = (0, 0, 0)  # steps, topk, draft tokens of the sweep's run without speculation


@dataclass(frozen=True, slots=True)
class SweepLine:
    """One configuration of the sweep, as its line says it."""

    line: int  # its line number in the file, from 1
    batch_size: int
    steps: int
    topk: int
    num_draft_tokens: int
    acc_length: float
    step_time: float  # seconds
    speed: float  # acc_length / step_time: tokens per second of one request
    completion_tokens: float | None = None

    @property
    def settings(self) -> tuple[int, int, int]:
        return self.steps, self.topk, self.num_draft_tokens

    @property
    def plain(self) -> bool:
        return self.settings == PLAIN

    @property
    def label(self) -> str:
        if self.plain:
            return f"line {self.line}: plain decoding at bs {self.batch_size}"
        return (f"line {self.line}: bs {self.batch_size}, {self.steps} steps, topk {self.topk}, "
                f"{self.num_draft_tokens} draft tokens")

    def to_json(self) -> dict:
        return {"line": self.line, **{name: getattr(self, name) for name in FIELDS}}


@dataclass(slots=True)
class Sweep:
    """A bench_speculative result file: its usable lines, and one note per line that is not one."""

    source: str
    lines: list[SweepLine]
    problems: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SweepMatch:
    """A sweep line beside a run's figures at its batch size: SGLang's accept length and speed, the
    trace's (speed: tokens per second of one request, 1 / time per token on the run's clock) and
    each ratio, trace over SGLang (1 where they agree)."""

    line: SweepLine
    accept_length: float | None  # the trace's
    speed: float | None  # the trace's tokens per second of one request

    @property
    def accept_ratio(self) -> float | None:
        return _ratio(self.accept_length, self.line.acc_length)

    @property
    def speed_ratio(self) -> float | None:
        return _ratio(self.speed, self.line.speed)

    def to_json(self) -> dict:
        return {"line": self.line.line, "sglang_accept_length": self.line.acc_length,
                "sglang_step_time_s": self.line.step_time, "sglang_speed": self.line.speed,
                "accept_length": _round(self.accept_length), "speed": _round(self.speed, 3),
                "accept_ratio": _round(self.accept_ratio), "speed_ratio": _round(self.speed_ratio)}


@dataclass(frozen=True, slots=True)
class Unmatched:
    line: SweepLine
    why: str

    def to_json(self) -> dict:
        return {**self.line.to_json(), "why": self.why}


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    return ours / theirs if ours is not None and theirs else None


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def read_sweep(path: str, max_bytes: int | None = None) -> Sweep:
    """The lines of a bench_speculative.py output (JSONL; gzip, URLs and named pipes as --spec-metrics
    files are read: read/side.py, within max_bytes, a line at a time). A line that is not such a record
    is a problem, said with its number; a file without any record is an error (TraceError, one line)."""
    lines, problems = [], []
    for number, text in SideFile(path, max_bytes).lines():
        text = text.strip()
        if not text:
            continue
        try:
            record = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            if "infinity" in str(exc):  # 1e400, or an integer of hundreds of digits
                problems.append(f"{path}: line {number} holds a number spanfix cannot use: left out")
            elif "depth" in str(exc):  # orjson's bound: 1024 levels
                problems.append(f"{path}: line {number} is JSON nested too deeply to read: left out")
            else:
                problems.append(f"{path}: line {number} is not JSON: left out")
            continue
        found, why = _line(number, record)
        if found is None:
            problems.append(f"{path}: line {number} {why}: left out")
        else:
            lines.append(found)
    if not lines:
        first = f" ({problems[0].split(': ', 1)[1]})" if problems else ""
        raise TraceError(f"{path}: no bench_speculative.py record{first}: expected one JSON line per configuration "
                         "with " + ", ".join(FIELDS[:-1]))
    return Sweep(path, lines, problems)


def _line(number: int, record: object) -> tuple[SweepLine | None, str]:
    if not isinstance(record, dict):
        return None, "is not a JSON object"
    missing = [name for name in FIELDS[:-1] if name not in record]
    if missing:
        return None, f"has no {', '.join(missing)}"
    for name in WHOLE:
        value = record[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            return None, f"has {name} {_shown(value)}, not a whole number"
    if record["batch_size"] < 1:
        return None, "has batch_size 0"
    figures = {}
    for name in ("acc_length", "step_time", "speed", "completion_tokens"):
        value = record.get(name)
        if name == "completion_tokens" and value is None:
            figures[name] = None
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            return None, f"has {name} {_shown(value)}, not a positive number"
        figures[name] = float(value)
    if figures["acc_length"] < 1:
        return None, f"has acc_length {figures['acc_length']:g}, below 1 (the bonus token counts)"
    most = record["num_draft_tokens"] if record["num_draft_tokens"] else 1
    if figures["acc_length"] > most:  # what no run can accept: everywhere else such a value is refused
        window = (f"its {most} draft token{'s' if most != 1 else ''} (a request accepts at most those)"
                  if record["num_draft_tokens"] else "1, plain decoding's (no draft token)")
        return None, f"has acc_length {figures['acc_length']:g}, above {window}"
    return SweepLine(number, *(record[name] for name in WHOLE), figures["acc_length"], figures["step_time"],
                     figures["speed"], figures["completion_tokens"]), ""


def _shown(value: object) -> str:
    text = orjson.dumps(value).decode() if isinstance(value, (str, int, float, bool, type(None))) else type(value).__name__
    return text if len(text) <= 40 else text[:40] + "..."


@dataclass(slots=True)
class SweepComparison:
    """SGLang's sweep beside the runs: how many lines matched a row, and those that matched none, with why."""

    source: str
    matched: int
    unmatched: list[Unmatched]
    problems: list[str]

    def to_json(self) -> dict:
        return {"source": self.source, "matched": self.matched, "unmatched": [u.to_json() for u in self.unmatched],
                "problems": self.problems}

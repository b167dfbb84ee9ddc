"""SGLang's step-span naming rule, as pure functions.

A step span is named ``step[MODE bs=N ...]``. Newer SGLang replaces MODE by ``DRAFT`` when the
span was emitted by a draft model runner, by ``VERIFY`` for the target's TARGET_VERIFY, and keeps
it otherwise; everything after MODE is kept byte for byte. See shared/docs/step-spans.md section 2.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# The ForwardMode names that ModelRunner.forward writes.
RUNNER_MODES = frozenset({
    "EXTEND", "DECODE", "MIXED", "IDLE", "TARGET_VERIFY", "DRAFT_EXTEND_V2", "DRAFT_EXTEND",
    "SPLIT_PREFILL", "DLLM_EXTEND", "PREBUILT",
})
# Stage words of the newer naming: a span that already carries one is never renamed again.
NEW_STAGES = frozenset({"DRAFT", "VERIFY"})
# Written by speculative workers outside ModelRunner.forward; the newer naming leaves them alone.
WORKER_MODES = frozenset({"DRAFT_LOOP"})
KNOWN_MODES = RUNNER_MODES | NEW_STAGES | WORKER_MODES
# What every command says of a trace with no step span at all (a plain PyTorch or other profile): one
# line, with what an SGLang capture holds, so that the reader knows it was not the file they meant.
NO_STEP_SPANS = ("no step spans: not a capture of SGLang's profiler? SGLang wraps every forward pass in a "
                 "user_annotation named step[MODE bs=N ...], e.g. step[DECODE bs=32] or step[TARGET_VERIFY bs=8], "
                 "in files such as prof-TP-0.trace.json.gz")

# A document with no event at all is a valid trace (SGLang's profiler on Apple MLX writes one beside its
# Metal .gputrace): said as such, not as a capture of something else.
EMPTY_TRACE = ("an empty trace: no event at all (valid, with nothing to relabel or measure; SGLang on Apple MLX "
               "writes one beside its Metal .gputrace)")


def no_step_spans(events: int) -> str:
    """What to say of a trace without step spans, by how many events it has."""
    return EMPTY_TRACE if not events else NO_STEP_SPANS


# MODE is the first token after "step["; the rest (" bs=.. toks=.. suffix") is kept untouched.
_MODE = re.compile(r"[^\s\]]+")


@dataclass(frozen=True, slots=True)
class StepName:
    mode: str  # upper-cased, so that nightly lower-case names are recognised
    rest: str  # everything between MODE and the closing bracket, leading space included

    @property
    def fields(self) -> dict[str, str]:
        """The key=value tokens after MODE (bs, toks, c_sq, ...), by key: SGLang adds keys over time."""
        return dict(token.split("=", 1) for token in self.rest.split() if "=" in token)

    @property
    def bs(self) -> int | None:
        return _batch(self.rest)[0]

    @property
    def toks(self) -> int | None:
        return _batch(self.rest)[1]

    @property
    def known(self) -> bool:
        return self.mode in KNOWN_MODES


# bs and toks as fields would give them (the last token "key=..." wins), without building fields:
# stats asks every step span for both, several times. One search finds both (a token starts at the
# start or after white space, so matches of the two keys never overlap), once per distinct rest.
_BS_TOKS = re.compile(r"(?:^|(?<=\s))(bs|toks)=(\S*)")


@functools.lru_cache(maxsize=2**16)  # decode steps repeat their names; a step's GPU copy repeats it too
def _batch(rest: str) -> tuple[int | None, int | None]:
    found = {"bs": None, "toks": None}
    for key, value in _BS_TOKS.findall(rest):
        found[key] = value
    return _int_or_none(found["bs"]), _int_or_none(found["toks"])


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def parse_step_name(name: object) -> StepName | None:
    """``step[MODE ...]`` -> StepName; anything else -> None. Suffix keys are read by key, not position."""
    if not isinstance(name, str):
        return None
    return _parse(name)


@functools.lru_cache(maxsize=2**16)  # a step's GPU annotation repeats its name, and decode steps repeat
def _parse(name: str) -> StepName | None:
    # "step[" MODE REST "]", MODE the longest run of characters that are neither space nor "]".
    # (As one regular expression, step\[([^\s\]]+)(.*)\], a long name without its closing "]"
    # backtracks through every split of MODE and REST: 64 kB took 8 s.)
    if not (name.startswith("step[") and name.endswith("]")):
        return None
    mode = _MODE.match(name, 5)
    if mode is None:
        return None
    return StepName(mode=mode.group().upper(), rest=name[mode.end():-1])


def new_stage(mode: str, *, is_draft: bool) -> str:
    """The stage word newer SGLang writes for a ModelRunner.forward span of this MODE."""
    mode = mode.upper()
    if mode in NEW_STAGES or mode in WORKER_MODES or mode not in RUNNER_MODES:
        return mode
    if is_draft:
        return "DRAFT"
    if mode == "TARGET_VERIFY":
        return "VERIFY"
    return mode


def relabel_step_name(name: str, *, is_draft: bool) -> str:
    """SGLang's newer ``build_step_span_name`` applied to an old span name; idempotent."""
    step = parse_step_name(name)
    if step is None:
        return name
    stage = new_stage(step.mode, is_draft=is_draft)
    if stage == step.mode:
        return name
    return f"step[{stage}{step.rest}]"


def suffix_values(name: str, keys: tuple[str, ...] = ("g_sk", "g_sq")) -> dict[str, int]:
    """Those key=value integers of a step name (found by position, not a regular expression: names
    are trace data)."""
    values = {}
    for key in keys:
        at = name.find(f" {key}=")
        if at < 0:
            continue
        start = at + len(key) + 2
        end = start
        while end < len(name) and name[end].isdigit():
            end += 1
        if end > start and (end == len(name) or name[end] in " ]"):
            values[key] = int(name[start:end])
    return values

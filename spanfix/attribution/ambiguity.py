"""The ambiguity model: a step span (or GPU annotation) no evidence decides, with what was missing and
what encloses it, and such spans grouped by reason. relabel's summary, inspect, check's trust rules
and the renderers all speak of ambiguity in these terms."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .index import StepSpan

SHOWN_ENCLOSING = 5  # enclosing spans named per ambiguous span: the innermost few say what it is


@dataclass(frozen=True, slots=True)
class AmbiguousSpan:
    name: str
    track: tuple
    start_us: float  # from the trace's start (clock.py), as Perfetto shows it
    detail: str
    enclosing: tuple[str, ...]  # the innermost SHOWN_ENCLOSING enclosing spans' names, innermost first
    enclosing_count: int = 0  # how many spans enclose it in all
    ts_us: float = 0.0  # its timestamp as in the trace

    @classmethod
    def of_step(cls, step: StepSpan, detail: str, origin_ns: int | None = None) -> AmbiguousSpan:
        # A report grows with the trace, never with its square: thousands of nested spans each
        # listing every span around it would make gigabytes of JSON from a trace of kilobytes.
        names = tuple(a.name for a in itertools.islice(step.span.ancestors(), SHOWN_ENCLOSING))
        return cls(step.name, step.track, step.span.start, detail, names, step.span.depth,
                   ((origin_ns or 0) + step.span.start_ns) / 1000)

    def to_json(self) -> dict:
        return {"name": self.name, "track": list(self.track), "ts": self.ts_us, "start_from_trace_us": self.start_us,
                "why": self.detail, "enclosing": list(self.enclosing), "enclosing_count": self.enclosing_count}


@dataclass(frozen=True, slots=True)
class AmbiguityGroup:
    reason: str
    count: int
    examples: list[AmbiguousSpan]


def by_reason(ambiguous: list[AmbiguousSpan], examples: int | None = 3) -> list[AmbiguityGroup]:
    """Ambiguous spans grouped by what was missing, the largest group first, with the first few of
    each (examples=None: all): one trace's thousand ambiguous spans usually share one or two reasons."""
    groups: dict[str, list[AmbiguousSpan]] = {}
    for span in ambiguous:
        groups.setdefault(span.detail, []).append(span)
    return [AmbiguityGroup(reason, len(spans), spans[:examples])
            for reason, spans in sorted(groups.items(), key=lambda item: -len(item[1]))]

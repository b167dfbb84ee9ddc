"""How far speculation pays, in words: the reach over several batch sizes (where it pays, where it
loses, the crossover) and the lever where it loses (the draft model's budget, the accept length it
would need). The verdict's line (render/speculation.py), compare's lines and the report's cards say them."""

from __future__ import annotations

from collections.abc import Sequence

from ..speculation import SpeculationResult
from ..speculation.reach import Lever, Point, Reach
from ..speculation.verdict import Verdict
from ..timing import format_us
from ..timing.table import CLOCK_WORDS


def _figures(points: Sequence[Point], interval: bool = False) -> str:
    """`1.70x at 4, 1.28x at 16`; one point alone: `0.72x`; interval: each with its 95% interval."""
    def one(point: Point) -> str:
        within = f", {point.interval[0]:.2f}\u2013{point.interval[1]:.2f}" if interval and point.interval else ""
        return f"{point.speedup:.2f}x{within}"
    if len(points) == 1:
        return one(points[0])
    return ", ".join(f"{one(point)} at {point.bs}" for point in points)


def _sizes(points: Sequence[Point]) -> str:
    return ", ".join(str(point.bs) for point in points)


def _ordered(reach: Reach) -> bool:
    """Every batch size that pays is below every one that loses (or one side is not measured)."""
    return reach.pays_up_to is None or reach.loses_from is None or reach.pays_up_to < reach.loses_from


def reach_text(reach: Reach) -> str:
    """Where it pays and where it loses, for a reach whose answer changes with the batch size:
    `speculation pays up to bs 16 (1.70x at 4, 1.28x at 16), loses from bs 64 (0.72x); crossover near
    bs 32 (linear in log bs between bs 16 and bs 64)`."""
    parts = []
    if _ordered(reach):
        if reach.pays_at:
            parts.append(f"pays up to bs {reach.pays_up_to} ({_figures(reach.pays_at)})")
        if reach.loses_at:
            parts.append(f"loses from bs {reach.loses_from} ({_figures(reach.loses_at)})")
    elif reach.crossover is not None:  # it loses at the smaller batch sizes, pays at the larger
        parts.append(f"loses up to bs {reach.loses_at[-1].bs} ({_figures(reach.loses_at)})")
        parts.append(f"pays from bs {reach.pays_at[0].bs} ({_figures(reach.pays_at)})")
    else:  # the answer changes more than once: each side's batch sizes said as they are
        parts.append(f"pays at bs {_sizes(reach.pays_at)} ({_figures(reach.pays_at)})")
        parts.append(f"loses at bs {_sizes(reach.loses_at)} ({_figures(reach.loses_at)})")
    text = "speculation " + ", ".join(parts)
    if reach.cannot_tell_at:
        text += (f"{'; it' if parts else ''} can't tell at bs {_sizes(reach.cannot_tell_at)} "
                 f"({_figures(reach.cannot_tell_at, interval=True)}: the interval holds 1)")
    if reach.crossover is not None:
        text += f"; crossover near bs {reach.crossover:.0f} ({reach.crossover_method})"
    elif reach.pays_at and reach.loses_at:
        text += f"; no crossover: {reach.crossover_method}"
    elif not reach.loses_at:
        text += "; it loses at no batch size measured"
    elif not reach.pays_at:
        text += "; it pays at no batch size measured"
    return text


def draft_tokens_of(spec: SpeculationResult) -> int | None:
    """The draft tokens the speculative runs share (None: unknown, or they differ): no request accepts more."""
    windows = {run.config.draft_tokens for run in spec.runs if run.config.speculative}
    return windows.pop() if len(windows) == 1 else None


def _beyond(lever: Lever, draft_tokens: int | None) -> str:
    return f", more than its {draft_tokens} draft tokens allow" if draft_tokens and lever.break_even > draft_tokens else ""


def lever_text(lever: Lever, draft_tokens: int | None = None) -> str:
    """What it would take to pay at the smallest batch size that loses: `to pay at bs 64 the draft
    model must take under 592.7 us per decode iteration (now 977.0 us), or accept over 3.53 tokens
    (now 2.10)`. An accept length above the draft tokens, which no request can reach, is not offered
    as a lever."""
    accept = f"accept over {lever.break_even:.2f} tokens" + (
        f" (now {lever.accept_length:.2f})" if lever.accept_length is not None else "")
    accept += _beyond(lever, draft_tokens)
    if lever.draft_budget_us is None or lever.draft_us is None:
        return f"to pay at bs {lever.bs} it must {accept}"
    if lever.draft_budget_us <= 0:
        return (f"to pay at bs {lever.bs} it must {accept}: even a draft model that took no time would not pay there "
                f"(now {format_us(lever.draft_us)} per decode iteration)")
    return (f"to pay at bs {lever.bs} the draft model must take under {format_us(lever.draft_budget_us)} per decode "
            f"iteration (now {format_us(lever.draft_us)}), or {accept}")


def reach_csv_rows(verdict: Verdict) -> list[tuple]:
    """The reach and the lever as stats' CSV rows (clock, count, scope, figure, value): scope `reach`
    (the lists as `bs:speedup` words) and `to_pay`; none where the verdict has neither."""
    rows: list[tuple] = []
    if verdict.reach is not None:
        found = verdict.reach.to_json()
        for name in ("pays_up_to", "loses_from", "crossover", "crossover_method"):
            if found[name] is not None:
                rows.append((verdict.reach.clock, None, "reach", name, found[name]))
        for name in ("pays_at", "loses_at", "cannot_tell_at"):
            if found[name]:
                rows.append((verdict.reach.clock, None, "reach", name,
                             " ".join(f"{point['bs']}:{point['speedup']}" for point in found[name])))
    if verdict.lever is not None:
        for name, value in verdict.lever.to_json().items():
            if name not in ("clock", "break_even_interval") and value is not None:
                rows.append((verdict.lever.clock, None, "to_pay", name, value))
    return rows


def reach_cards(verdict: Verdict | None, draft_tokens: int | None = None) -> list[list[str]]:
    """The report's cards: how far it pays (over several batch sizes), and what it would take where it
    loses; label and value each, the label naming its basis (clock, batch sizes) as the other cards do."""
    if verdict is None:
        return []
    cards = []
    reach, lever = verdict.reach, verdict.lever
    if reach is not None:
        sides = []
        if _ordered(reach):
            sides += [f"pays up to bs {reach.pays_up_to}"] if reach.pays_at else []
            sides += [f"loses from bs {reach.loses_from}"] if reach.loses_at else []
        elif reach.crossover is not None:
            sides += [f"loses up to bs {reach.loses_at[-1].bs}", f"pays from bs {reach.pays_at[0].bs}"]
        else:
            sides += [f"pays at bs {_sizes(reach.pays_at)}", f"loses at bs {_sizes(reach.loses_at)}"]
        if reach.cannot_tell_at:
            sides.append(f"can't tell at bs {_sizes(reach.cannot_tell_at)}")
        every = sorted((*reach.pays_at, *reach.loses_at, *reach.cannot_tell_at), key=lambda point: point.bs)
        cards.append([f"how far it pays ({CLOCK_WORDS[reach.clock]}, bs {_sizes(every)})", "; ".join(sides)])
        if reach.crossover is not None:
            low, high = (reach.pays_up_to, reach.loses_from) if _ordered(reach) else \
                (reach.loses_at[-1].bs, reach.pays_at[0].bs)
            cards.append([f"crossover, speedup 1 ({CLOCK_WORDS[reach.clock]}, bs {low} to {high}: linear in log bs)",
                          f"bs {reach.crossover:.0f}"])
    if lever is not None:
        basis = f"{CLOCK_WORDS[lever.clock]}, bs {lever.bs}"
        if lever.draft_budget_us is not None and lever.draft_us is not None:
            budget = "none (a draft model that took no time would not pay)" if lever.draft_budget_us <= 0 else \
                f"under {format_us(lever.draft_budget_us)}"
            cards.append([(f"to pay, the draft model's time per decode iteration ({basis}; now "
                          f"{format_us(lever.draft_us)})"), budget])
        now = "" if lever.accept_length is None else f"; now {lever.accept_length:.2f}"
        cards.append([f"to pay, the accept length ({basis}{now})", f"over {lever.break_even:.2f}{_beyond(lever, draft_tokens)}"])
    return cards

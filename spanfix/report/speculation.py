"""The report's speculation section: the model view and the speed figures as tables (the same
figures as `stats`' speculation table), the accept length of every decode iteration over capture
time where the trace tells it, and the key figures the summary cards show."""

from __future__ import annotations

from collections import defaultdict

from ..render.reach import draft_tokens_of, reach_cards
from ..render.speculation import (
    by_bs_cells,
    interval_text,
    not_speculative,
    speculation_cells,
    speculation_notes,
    speculation_title,
    verdict_line,
)
from ..speculation import SpeculationResult
from ..speculation.result import iteration_model_of
from ..timing import CPU, GPU, format_us
from ..timing.table import CLOCK_WORDS
from .formatting import _cell, _column, _round, _table

MAX_POINTS = 5000  # accept lengths drawn per series; more are thinned to every n-th


def _speculation(spec: SpeculationResult | None) -> dict | None:
    if spec is None:
        return None
    if not spec.speculative:
        return {"speculative": False, "line": not_speculative(spec)}
    header, rows = speculation_cells(spec)
    tables = [_as_table("speculation-figures", speculation_title(spec), header, rows, note=None)]
    by_bs = by_bs_cells(spec)
    if by_bs is not None:
        tables.append(_as_table("speculation-bs", "By batch size", *by_bs, note=None))
    return {"speculative": True, "verdict": verdict_line(spec), "tables": tables, "notes": speculation_notes(spec),
            "series": _series(spec), "cards": _cards(spec) + reach_cards(spec.verdict, draft_tokens_of(spec)),
            "cards_basis": cards_basis(spec)}


def _as_table(table_id: str, title: str, header: list[str], rows: list[list[str]], note: str | None) -> dict:
    columns = [_column("figure" if k == 0 else name, name, numeric=k > 0) for k, name in enumerate(header)]
    # A sub-row's indent as em spaces, one a level: HTML collapses the terminal's plain spaces.
    return _table(table_id, title, columns, [[_cell(_indented(text) if k == 0 else text, text.strip() if k == 0 else None)
                                              for k, text in enumerate(row)] for row in rows], note)


def _indented(label: str) -> str:
    depth = (len(label) - len(label.lstrip(" "))) // 2  # the terminal's two spaces a level, each level kept
    return "\u2003" * depth + label.lstrip(" ")


def _series(spec: SpeculationResult) -> list[dict]:
    by: dict[str, list] = defaultdict(list)
    for it in spec.iterations:
        by[it.rank or it.file].append(it)
    series = []
    for label, found in sorted(by.items()):
        found.sort(key=lambda it: it.start_from_trace_us)
        step = max(1, len(found) // MAX_POINTS + (len(found) % MAX_POINTS > 0))
        shown = found[::step]
        series.append({"label": label, "x": [_round(it.start_from_trace_us / 1e3) for it in shown],
                       "y": [None if it.accept_length is None else _round(it.accept_length) for it in shown],
                       "known": sum(it.accept_length is not None for it in found), "count": len(found),
                       "every": step})
    return series


def _cards(spec: SpeculationResult) -> list[list[str]]:
    """Label and value of each key figure, on one basis: the verdict's clock and batch sizes (the
    overall row's, so that speedup = accept length x plain iteration / speculative iteration and
    break-even = speculative iteration / plain iteration multiply out on the cards as in the table).
    Without a verdict clock, the whole inputs' figures, as before."""
    verdict = spec.verdict  # the same verdict as stats' line: its clock, its figures
    overall = spec.overall
    if verdict is None or verdict.clock is None or overall is None or not verdict.batch_sizes:
        return _whole_cards(spec)
    clock, where = verdict.clock, CLOCK_WORDS[verdict.clock]
    basis = f"{where}, bs {_sizes(verdict.batch_sizes)}"
    cards = []
    iteration, plain = overall.iteration_us.get(clock), overall.plain_iteration_us.get(clock)
    if iteration is not None:
        cards.append([f"speculative decode iteration, steady mean ({basis})", format_us(iteration)])
    if plain is not None:
        cards.append([f"plain decode iteration, steady mean ({basis})", format_us(plain)])
    model, _ = iteration_model_of([it for it in spec.iterations if it.bs in verdict.batch_sizes])
    if clock in model:
        cards.append([f"draft model, share of the decode iteration ({basis})", f"{model[clock].share('draft') * 100:.1f}%"])
    per_token = overall.per_token_us.get(clock)
    if iteration and per_token:  # the accept length these figures used: iteration over time per token
        assumed = [row.bs for row in spec.rows if row.bs in verdict.batch_sizes and row.accept_assumed]
        source = (overall.accept_source or (spec.used.source if spec.used is not None else "?")) + (
            f", assumed at bs {_sizes(assumed)}" if assumed else "")
        cards.append([f"accept length ({source}; {basis})", f"{iteration / per_token:.2f}"])
    if verdict.speedup is not None:
        cards.append([f"speedup over plain decoding ({basis})", f"{verdict.speedup:.2f}"])
        state = {True: "it pays", False: "it does not pay", None: "can't tell"}[verdict.pays]
        cards.append([f"speedup, 95% interval ({state})", interval_text(verdict.speedup_interval)])
    if verdict.break_even is not None:
        cards.append([f"break-even accept length ({basis})", f"{verdict.break_even:.2f}"])
    return cards


def cards_basis(spec: SpeculationResult) -> str | None:
    """What the cards are over, said under them (None: the whole inputs, no verdict clock)."""
    verdict = spec.verdict
    if verdict is None or verdict.clock is None or spec.overall is None or not verdict.batch_sizes:
        return None
    text = (f"These figures are over the verdict's batch sizes (bs {_sizes(verdict.batch_sizes)}) on its "
            f"{CLOCK_WORDS[verdict.clock]} clock, warm-up iterations left out as the verdict leaves them out")
    if verdict.speedup is not None:
        text += ": speedup = accept length \u00d7 plain decode iteration / speculative decode iteration"
    if verdict.break_even is not None:
        text += ("; " if verdict.speedup is not None else ": ") + \
            "break-even = speculative decode iteration / plain decode iteration"
    return text + ". The tables below have every batch size."


def _sizes(sizes) -> str:
    return ", ".join(map(str, sizes))


def _whole_cards(spec: SpeculationResult) -> list[list[str]]:
    """The inputs' key figures where there is no verdict clock: the draft model's share over every
    decode iteration, and the accept length."""
    cards = []
    for clock in (GPU, CPU):
        found = spec.iteration_model.get(clock)
        if found is not None:
            cards.append([f"draft model, share of the decode iteration ({CLOCK_WORDS[clock]})",
                          f"{found.share('draft') * 100:.1f}%"])
            break
    if spec.accept_length is not None:
        cards.append([f"accept length ({spec.used.source})", f"{spec.accept_length:.2f}"])
    return cards

"""The speculation figures for people: a short table (the model view, the accept length and where it
came from, time per token, speedup and break-even), one by batch size when there are several, and the
notes that keep the stage and iteration tables honest about the draft model's cost."""

from __future__ import annotations

from ..speculation import SpeculationResult, SpeedRow, Verdict
from ..speculation.result import SPEED, clock_for
from ..timing import CPU, GPU, StatsResult, format_us
from ..timing.table import CLOCK_WORDS
from .reach import draft_tokens_of, lever_text, reach_csv_rows, reach_text

NOTED = 0.05  # a stage table says what its draft rows leave out from this share of the draft's time
# What the batch-size table leaves out first to fit (the draft model's time and budget are in the verdict's lever).
BY_BS_LEAVE_OUT = ("draft budget", "draft", "tokens/s", "plain iter", "per token")


def speculation_of(result: StatsResult) -> SpeculationResult | None:
    found = result.speculation
    return found if isinstance(found, SpeculationResult) else None


def _time_share(value: float | None, share: float | None = None) -> str:
    if value is None:
        return "-"
    return format_us(value) + ("" if share is None else f" ({share:.1%})")


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def interval_text(interval: tuple[float, float] | None) -> str:
    """A 95% interval as people read it: `1.33–1.47` (an en dash between the ends)."""
    return "-" if interval is None else f"{interval[0]:.2f}\u2013{interval[1]:.2f}"


def row_mark(row: SpeedRow, clock: str) -> str:
    """What a batch size's speedup says: pays, loses, can't tell, or not comparable (break-even below 1)."""
    if row.comparable(clock) is False:
        return "not comparable"
    if row.speedup.get(clock) is None:
        return ""
    found = row.pays(clock)
    return "pays" if found else "loses" if found is False else "can't tell"


def speculation_cells(spec: SpeculationResult) -> tuple[list[str], list[list[str]]]:
    """One row per figure, a column per clock that has figures."""
    clocks = [clock for clock in (CPU, GPU) if clock in spec.model or clock in spec.iteration_model
              or (spec.overall is not None and spec.overall.iteration_us.get(clock) is not None)]
    header = ["figure", *(CLOCK_WORDS[clock] for clock in clocks)]
    rows: list[list[str]] = []

    def add(label: str, cell) -> None:
        rows.append([label, *(cell(clock) for clock in clocks)])

    def whole(part: str):
        def cell(clock: str) -> str:
            found = spec.model.get(clock)
            return "-" if found is None or part not in found.parts else _time_share(found.parts[part], found.share(part))
        return cell

    def per_iteration(part: str | None):
        def cell(clock: str) -> str:
            found = spec.iteration_model.get(clock)
            if found is None or (part is not None and part not in found.parts):
                return "-"
            count = spec.iteration_counts[clock]
            if part is None:
                return format_us(found.total_us / count)
            return _time_share(found.parts[part] / count, found.share(part))
        return cell

    def add_model(models: dict, title: str, total, part, draft: str, outside=None) -> None:
        """A total, then its parts (which add up to it), so that each share says what it is of."""
        if not models:
            return
        add(title, total)
        add(f"  {draft}", part("draft"))
        if outside is not None:
            add("    outside draft step spans", outside)
        add("  target verify", part("verify"))
        if any(found.parts["ambiguous"] for found in models.values()):
            add("  ambiguous", part("ambiguous"))
        add("  other", part("other"))
        if GPU in models:
            add("  idle", part("idle"))

    add_model(spec.model, "whole trace",
              lambda clock: "-" if clock not in spec.model else format_us(spec.model[clock].total_us),
              whole, "draft model (every pass)",
              lambda clock: "-" if clock not in spec.model else format_us(spec.model[clock].draft_outside_steps_us))
    add_model(spec.iteration_model, "decode iteration, mean", per_iteration(None), per_iteration, "draft model")
    overall = spec.overall
    rows.append(["accept length", _ratio(spec.accept_length), *([""] * (len(clocks) - 1))])
    if overall is not None:
        covered = {size for clock in clocks for size in overall.covered.get(clock, ())}
        if len(spec.rows) > 1:
            rows.append([f"over bs {_sizes(sorted(covered))}", *([""] * len(clocks))])
        # A figure no clock has is left out: the notes under the table say what it needs.
        for label, cell in (("speculative iteration", lambda clock: _time_share(overall.iteration_us.get(clock))),
                            ("time per token (per request)", lambda clock: _time_share(overall.per_token_us.get(clock))),
                            ("tokens per second (batch)", lambda clock: _rate(overall.tokens_per_s.get(clock))),
                            ("plain decode iteration", lambda clock: _time_share(overall.plain_iteration_us.get(clock))),
                            ("  its DECODE step (forward)", lambda clock: _time_share(overall.plain_us.get(clock))),
                            ("speedup", lambda clock: _ratio(overall.speedup.get(clock))),
                            ("  95% interval", lambda clock: interval_text(overall.speedup_interval.get(clock))),
                            ("break-even accept length", lambda clock: _ratio(overall.break_even.get(clock))),
                            ("  95% interval ", lambda clock: interval_text(overall.break_even_interval.get(clock)))):
            cells = [cell(clock) for clock in clocks]
            if any(text != "-" for text in cells):
                rows.append([label, *cells])
    return header, rows


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _sizes(sizes: list) -> str:
    return ", ".join(map(str, sizes)) if sizes else "-"


def by_bs_cells(spec: SpeculationResult) -> tuple[list[str], list[list[str]]] | None:
    """Per batch size, on the verdict's clock (the one that bounds the decode iteration): only when
    there are several (with one, the overall figures are its own)."""
    if len(spec.rows) < 2:
        return None
    clock = clock_for(SPEED, spec)
    header = ["bs", "iters", "accept", "iteration", "per token", "tokens/s", "plain iter", "speedup", "95%",
              "break-even", "draft", "draft budget", "note"]
    return header, [_bs_row(row, clock) for row in spec.rows]


def _accept(row) -> str:
    """A row's accept length (a SpeedRow's, or compare's), starred where it is assumed (accept*)."""
    return _ratio(row.accept_length) + ("*" if row.accept_assumed and row.accept_length is not None else "")


def _bs_row(row: SpeedRow, clock: str) -> list[str]:
    return [str(row.bs), str(row.iterations), _accept(row), _time_share(row.iteration_us.get(clock)),
            _time_share(row.per_token_us.get(clock)), _rate(row.tokens_per_s.get(clock)),
            _time_share(row.plain_iteration_us.get(clock)), _ratio(row.speedup.get(clock)),
            interval_text(row.speedup_interval.get(clock)), _ratio(row.break_even.get(clock)),
            _time_share(row.draft_us.get(clock)), _time_share(row.draft_budget_us.get(clock)), row_mark(row, clock)]


def speculation_title(spec: SpeculationResult) -> str:
    config = spec.config
    return f"speculation ({config.title if config is not None else ', '.join(spec.algorithms)})"


def verdict_line(spec: SpeculationResult) -> str | None:
    """The answer, in one line: does speculation pay, by how much, at which batch sizes and why that
    clock; or what a verdict needs."""
    verdict = spec.verdict
    if verdict is None:
        return None
    if verdict.speedup is None:
        text = f"no speculation verdict: it needs {verdict.missing}" if verdict.missing.startswith(("the accept", "a plain")) \
            else f"no speculation verdict: {verdict.missing}"
        if verdict.break_even is not None:
            text += (f"; break-even accept length {verdict.break_even:.2f}{within_text(verdict.break_even_interval)} "
                     f"at bs {_sizes(list(verdict.batch_sizes))} ({verdict.why})")
        return text
    sizes = _sizes(list(verdict.batch_sizes))
    figure = f"{verdict.speedup:.2f}x" + within_text(verdict.speedup_interval)
    lever = [] if verdict.lever is None else [lever_text(verdict.lever, draft_tokens_of(spec))]
    pooled = (f"break-even accept length {verdict.break_even:.2f}{within_text(verdict.break_even_interval)}, "
              f"accepted {verdict.accept_length:.2f} ({_accept_source(spec, verdict)})")
    if verdict.reach is not None and verdict.reach.changes:
        # The batch sizes disagree: where it pays and where it loses first, the pooled figure after, never alone.
        return "; ".join([reach_text(verdict.reach), *lever,
                          f"pooled over bs {sizes}: {figure} plain decoding ({verdict.why}); {pooled}", *verdict.caveats])
    if verdict.pays is None:
        head = f"speculation: can't tell at bs {sizes}: {figure} plain decoding, {verdict.cannot_tell}"
    else:
        head = (f"{'speculation pays' if verdict.pays else 'speculation does not pay'}: {figure} plain decoding at bs "
                f"{sizes}")
    return "; ".join([f"{head} ({verdict.why}); {pooled}", *lever, *verdict.caveats])


def within_text(interval: tuple[float, float] | None) -> str:
    return "" if interval is None else f" ({interval_text(interval)})"


def _accept_source(spec: SpeculationResult, verdict: Verdict) -> str:
    """The accept length's source, and the verdict's batch sizes it was assumed at (none: measured at each)."""
    source = verdict.accept_source or (spec.used.source if spec.used is not None else "?")
    assumed = [row.bs for row in spec.rows if row.bs in verdict.batch_sizes and row.accept_assumed]
    return source + (f", assumed at bs {_sizes(assumed)}" if assumed else "")


def speculation_notes(spec: SpeculationResult) -> list[str]:
    notes = []
    if spec.used is not None:
        where = f" ({spec.used.file})" if spec.used.file else ""
        notes.append(f"accept length {spec.used.value:.2f} ({spec.used.source}{where}): {spec.used.detail}")
    else:
        notes.append("accept length unknown: the trace does not tell it; give --spec-metrics FILE (server log, "
                     "bench_serving JSONL, /server_info JSON) or --accept-length L")
    if spec.unknown:
        notes.append("decode iterations whose accept length the trace does not tell: "
                     + "; ".join(f"{why} x{count}" for why, count in spec.unknown.items()))
    for figure in spec.figures:
        if figure is not spec.used and figure.value is not None:
            where = f" ({figure.file})" if figure.file else ""
            notes.append(f"also: {figure.value:.2f} ({figure.source}{where}): {figure.detail}")
    if spec.baseline is not None:  # a speculative one is said as what it is
        notes.append(f"plain twin: {spec.baseline.source}" if spec.baseline.plain else
                     f"baseline: {spec.baseline.source} (it runs speculative decoding: no plain twin)")
    if spec.verdict is not None and spec.verdict.interval_method:
        notes.append(f"intervals: {spec.verdict.interval_method}")
    if any(row.accept_assumed for row in spec.rows) and len(spec.rows) > 1:
        notes.append("accept* : not measured at that batch size (the source's mean, assumed)")
    notes += spec.notes
    return notes


def not_speculative(spec: SpeculationResult) -> str:
    steps = sorted((bs, count) for (bs, clock), (count, _) in spec.decode_steps.items() if clock == CPU)
    text = "speculation: none in these inputs (no VERIFY step, nothing says it speculates)"
    if steps:
        text += ("; their plain DECODE steps (" + ", ".join(f"bs {bs}: {count}" for bs, count in steps)
                 + ") can serve another capture's --baseline for the speedup")
    return text


def stage_note(result: StatsResult, clock: str) -> str | None:
    """Under a stage table: how much of the draft model's time its DRAFT rows leave out (graph replays
    and draft work outside step spans)."""
    spec = speculation_of(result)
    found = None if spec is None else spec.model.get(clock)
    if found is None or not found.parts["draft"] or found.draft_outside_steps_us < NOTED * found.parts["draft"]:
        return None
    outside = found.draft_outside_steps_us
    return (f"the draft step rows (DRAFT, DRAFT_LOOP, DRAFT_EXTEND_V2) leave out {outside / found.parts['draft']:.0%} "
            f"of the draft model's {CLOCK_WORDS[clock]} time ({format_us(outside)} of {format_us(found.parts['draft'])}: "
            "graph replays and draft work outside step spans); the speculation table counts all of it")


def iteration_note(result: StatsResult) -> str | None:
    """Under the iteration table: draft and draft_extend are phases, both the draft model's work."""
    spec = speculation_of(result)
    if spec is None or not spec.iteration_model:
        return None
    shares = [f"{spec.iteration_model[clock].share('draft'):.1%} {CLOCK_WORDS[clock]}"
              for clock in (CPU, GPU) if clock in spec.iteration_model]
    text = f"the draft model's work is draft + draft_extend: {', '.join(shares)} of the iteration"
    host = next((it for it in result.iterations if it.clock == CPU), None)
    if host is not None and host.parts.get("draft", 0) == 0 and host.parts.get("draft_extend", 0) > 0:
        text += " (nothing drafts before the verify: this algorithm, MTP's multi-layer worker, drafts after it)"
    return text


def speculation_tables(result: StatsResult) -> list[tuple]:
    """The speculation table(s) as stats_table lays tables out: (title, header, rows, (), notes); a
    line alone (no header) for inputs without speculation."""
    spec = speculation_of(result)
    if spec is None or not result.rows:
        return []
    if not spec.speculative:
        return [(not_speculative(spec), [], [], ())]
    line = verdict_line(spec)
    tables = [(line, [], [], ())] if line else []
    if spec.verdict is not None and spec.verdict.steady_state:
        tables.append((spec.verdict.steady_state, [], [], ()))
    tables.append((speculation_title(spec), *speculation_cells(spec), (), speculation_notes(spec)))
    by_bs = by_bs_cells(spec)
    if by_bs is not None:
        tables.append((f"speculation by batch size ({CLOCK_WORDS[clock_for(SPEED, spec)]} clock)", *by_bs,
                       BY_BS_LEAVE_OUT))
    return tables


def speculation_markdown(result: StatsResult, markdown_table) -> list[str]:
    from .escape import markdown_text

    spec = speculation_of(result)
    if spec is None or not result.rows:
        return []
    if not spec.speculative:
        return [markdown_text(not_speculative(spec)), ""]
    title = speculation_title(spec)
    sections = [f"### {markdown_text(title[0].upper() + title[1:])}", ""]
    line = verdict_line(spec)
    if line:
        sections += [f"**{markdown_text(line, whole=True)}**", ""]
    if spec.verdict is not None and spec.verdict.steady_state:
        sections += [markdown_text(spec.verdict.steady_state, whole=True), ""]
    sections += [markdown_table(*speculation_cells(spec)), ""]
    by_bs = by_bs_cells(spec)
    if by_bs is not None:
        sections += [markdown_table(*by_bs), ""]
    for note in speculation_notes(spec):  # a quote each: lines of one quote run together when rendered
        sections += [f"> {markdown_text(note, whole=True)}", ""]
    return sections


def speculation_csv_rows(result: StatsResult, columns: list[str]) -> list[list]:
    """The model view of the whole inputs as rows of the stage CSV: stage `model:PART`, with its clock,
    total_us and share (the other columns empty); only when the rows are grouped by stage alone, whose
    scope (all inputs together) is the model view's."""
    spec = speculation_of(result)
    if spec is None or not spec.speculative or result.by != ("stage",):
        return []
    rows = []
    for clock in (CPU, GPU):
        found = spec.model.get(clock)
        if found is None:
            continue
        for part, total in found.parts.items():
            values = {"stage": f"model:{part}", "clock": clock, "total_us": round(total, 3),
                      "share": round(found.share(part), 6)}
            rows.append([values.get(column) for column in columns])
    return rows


# The speed figures of a row as CSV names them, each per clock.
_ROW_FIGURES = (("iteration_us", "iteration_us"), ("per_token_us", "per_token_us"), ("tokens_per_s", "tokens_per_s"),
                ("plain_iteration_us", "plain_iteration_us"), ("plain_decode_us", "plain_us"), ("speedup", "speedup"),
                ("break_even", "break_even"), ("draft_us", "draft_us"), ("draft_budget_us", "draft_budget_us"))


def speculation_csv_figures(result: StatsResult) -> list[tuple]:
    """The verdict and the speed figures as CSV rows: (clock, count, scope, figure, value); scope is
    `verdict`, `overall` or `bs=N`. Empty without speculation."""
    spec = speculation_of(result)
    if spec is None or not spec.speculative:
        return []
    rows: list[tuple] = []
    verdict = spec.verdict
    if verdict is not None:
        found = verdict.to_json()
        for name in ("pays", "speedup", "speedup_interval", "break_even", "break_even_interval", "accept_length",
                     "accept_source", "batch_sizes", "why", "missing", "cannot_tell", "steady_state", "caveats"):
            value = found[name]
            value = " ".join(map(str, value)) if isinstance(value, list) and name != "caveats" else \
                "; ".join(value) if isinstance(value, list) else value
            if value not in (None, ""):
                rows.append((verdict.clock, None, "verdict", name, value))
        for name in ("iterations", "variation", "left_out"):
            for side, value in found[name].items():
                if value is not None:
                    rows.append((verdict.clock, None, "verdict", f"{name}_{side}", value))
        rows += reach_csv_rows(verdict)
    if spec.accept_length is not None:
        rows.append((None, None, "overall", "accept_length", round(spec.accept_length, 4)))
    for row in ([spec.overall] if spec.overall is not None else []) + list(spec.rows):
        scope = "overall" if row.bs is None else f"bs={row.bs}"
        if row.bs is not None and row.accept_length is not None:
            rows.append((None, row.iterations, scope, "accept_length", round(row.accept_length, 4)))
        for clock in (CPU, GPU):
            for name, attribute in _ROW_FIGURES:
                value = getattr(row, attribute).get(clock)
                if value is not None:
                    rows.append((clock, row.counts.get(clock), scope, name,
                                 round(value, 1 if name == "tokens_per_s" else 3 if name.endswith("_us") else 4)))
            for name in ("speedup_interval", "break_even_interval"):
                interval = getattr(row, name).get(clock)
                if interval is not None:
                    rows.append((clock, row.counts.get(clock), scope, name, " ".join(f"{end:.4f}" for end in interval)))
            if row.speedup.get(clock) is not None or row.comparable(clock) is False:
                rows.append((clock, row.counts.get(clock), scope, "pays", row_mark(row, clock)))
    return rows

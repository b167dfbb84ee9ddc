"""A comparison of runs for people and for machines: the terminal's table (made to fit its width as the
stats tables are, the whys as numbered notes under it), markdown for a CI summary, CSV (one line per
run and batch size, raw figures) and the lines that say each run's verdict and each budget's outcome.
JSON is Comparison.to_json(). Run names and paths are data: rich Text, escaped markdown and CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Collection
from dataclasses import replace

from rich.console import Group
from rich.text import Text

from ..checking.outcomes import BROKEN, SKIPPED, Outcome
from ..speculation.comparison import ComparedRow, ComparedRun, Comparison
from ..text import printable, whole_reason
from ..timing import format_us
from ..timing.table import CLOCK_WORDS
from .escape import csv_row, markdown_text
from .fit import fitted_table
from .speculation import _accept, _rate, _ratio, interval_text, verdict_line, within_text
from .stats import grouped, markdown_table

# What the terminal's table leaves out first to fit, one at a time (every figure is in --format csv).
LEAVE_OUT = ("tokens/s", "per token", "clock", "iteration", "draft", "break-even", "95%")
SWEEP_LEAVE_OUT = ("step time", "line")
TITLE = "which configuration pays most: speedup over plain decoding"


def common_graph(comparison: Comparison) -> bool | None:
    """CUDA graphs (True) or eager (False) when every run says so alike; else None."""
    found = {None if run.config is None else run.config.cuda_graph for run in comparison.runs}
    return found.pop() if len(found) == 1 else None


def config_label(run: ComparedRun, graph_said: bool = False) -> str:
    """A run's configuration in a few cells: `EAGLE 3/1/4 graphs` (steps/topk/draft tokens; ? where
    the traces do not say), `plain graphs`, `2 configs`; graph_said: the graph mode is every run's,
    said once elsewhere."""
    config = run.config
    if config is None:
        return f"{len(run.configs)} configs" if run.configs else "?"
    graph = "" if config.cuda_graph is None or graph_said else " graphs" if config.cuda_graph else " eager"
    if run.plain:
        return "plain" + graph
    return f"{config.server_algorithm or config.algorithm} {'/'.join(setting_cells(run))}{graph}"


def setting_cells(run: ComparedRun) -> list[str]:
    """A run's steps, topk and draft tokens as every table says them: `?` where nothing says, `-` where
    it is not a setting of the run: plain decoding has none, NGRAM no steps and no topk (no draft model
    runs; SGLang's topk 10 for it is its internal n-gram BFS breadth)."""
    config = run.config
    if config is None:
        return ["?"] * 3
    if run.plain:
        return ["-"] * 3
    values = (config.steps, config.topk, config.draft_tokens) if config.drafts else (None, None, config.draft_tokens)
    unused = [False, False, False] if config.drafts else [True, True, False]
    return ["-" if gone else "?" if value is None else str(value) for value, gone in zip(values, unused)]


def draft_free(comparison: Comparison) -> list[str]:
    """The runs whose algorithm runs no draft model (NGRAM): their steps and topk read `-`."""
    return [run.name for run in comparison.runs if run.config is not None and not run.plain and not run.config.drafts]


def _time(value: float | None) -> str:
    return "-" if value is None else format_us(value)


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def marks(row: ComparedRow) -> list[str]:
    return ((["best"] if row.best else []) + (["fastest"] if row.fastest else []) + (["loses"] if row.loses else [])
            + (["can't tell"] if row.cannot_tell else []) + ([] if row.comparable else ["not comparable"]))


class Whys:
    """The reasons rows are not compared, numbered once each, for notes under a table."""

    def __init__(self) -> None:
        self.said: dict[str, int] = {}

    def number(self, why: str) -> int:
        return self.said.setdefault(why, len(self.said) + 1)

    def lines(self) -> list[str]:
        return [f"[{number}] {why}" for why, number in self.said.items()]


def table_cells(comparison: Comparison, whys: Whys | None = None) -> tuple[list[str], list[list[str]]]:
    """The terminal's table: a run's name and configuration on its first row, the figures on the run's
    clock, and a note (best, loses, or [n]: why it is not compared, said under the table)."""
    header = ["run", "bs", "config", "accept", "clock", "iteration", "draft", "per token", "tokens/s", "speedup",
              "95%", "break-even", "note"]
    rows = []
    said = common_graph(comparison) is not None
    for run in comparison.runs:
        for k, row in enumerate(run.rows):
            note = marks(row)
            if row.why and whys is not None:
                note.append(f"[{whys.number(row.why)}]")
            rows.append([run.name if k == 0 else "", "-" if row.bs is None else str(row.bs),
                         config_label(run, said) if k == 0 else "", _accept(row), row.clock or "-", _time(row.iteration_us),
                         _share(row.draft_share), _time(row.per_token_us), _rate(row.tokens_per_s),
                         _ratio(row.speedup), interval_text(row.speedup_interval), _ratio(row.break_even),
                         ", ".join(note)])
    return header, rows


def full_cells(comparison: Comparison, merged: bool = False) -> tuple[list[str], list[list[str]]]:
    """Every column, every row whole (markdown, the page): the settings apart (merged: in one column,
    steps/topk/draft tokens, and the speedup's interval in its cell), the whys in full."""
    settings_header = ["steps/topk/draft"] if merged else ["steps", "topk", "draft tokens"]
    speed_header = ["speedup", "break-even"] if merged else ["speedup", "speedup 95%", "break-even", "break-even 95%"]
    header = ["run", "bs", "algorithm", *settings_header, "graphs", "accept", "accept source",
              "clock", "iteration", "draft share", "per token", "tokens/s", *speed_header, "note"]
    rows = []
    for run in comparison.runs:
        graph = "-" if run.config is None or run.config.cuda_graph is None else \
            "CUDA graphs" if run.config.cuda_graph else "eager"
        for row in run.rows:
            note = ", ".join(marks(row) + ([row.why] if row.why else []))
            values = setting_cells(run)
            values = ["-"] if merged and set(values) == {"-"} else values
            speed = [_ratio(row.speedup) + within_text(row.speedup_interval), _ratio(row.break_even)] if merged else \
                [_ratio(row.speedup), interval_text(row.speedup_interval), _ratio(row.break_even),
                 interval_text(row.break_even_interval)]
            rows.append([run.name, "-" if row.bs is None else str(row.bs), "plain decoding" if run.plain
                         else run.algorithm, *(["/".join(values)] if merged else values),
                         graph, _accept(row), row.accept_source or "-", row.clock or "-", _time(row.iteration_us),
                         _share(row.draft_share), _time(row.per_token_us), _rate(row.tokens_per_s), *speed, note])
    return header, rows


FULL_TEXT = frozenset({"run", "algorithm", "steps/topk/draft", "graphs", "accept source", "clock", "note"})


def verdict_lines(comparison: Comparison) -> list[str]:
    """Each run's answer in one line, named: the verdict of `stats` (its clock, why that clock), or why
    it is not compared, and its steady-state line where iterations were left out; the baseline's says
    what it is."""
    lines = []
    for run in comparison.runs:
        if run.baseline:
            text = (f"the baseline: {run.title}" + (f" ({run.why})" if run.why else
                                                    f", speedup 1 by definition ({_clock_of(run)})"))
        elif run.plain:
            text = f"{run.title}, another plain run: " + (run.why or f"its decode iteration against the baseline's "
                                                                     f"({_clock_of(run)})")
        elif run.result is not None:
            text = verdict_line(replace(run.result, verdict=run.verdict)) or (run.why or "no verdict")
        else:
            text = run.why or "not compared"
        lines.append(f"{run.name}: {text}")
        if not run.plain and run.verdict is not None and run.verdict.steady_state:  # what its figures leave out
            lines.append(f"{run.name}: {run.verdict.steady_state}")
    return lines


def _clock_of(run: ComparedRun) -> str:
    return f"its {CLOCK_WORDS[run.clock]} clock" if run.clock else "no clock"


def best_line(comparison: Comparison) -> str | None:
    """The best run at each batch size, and where no configuration pays, that plain decoding is fastest."""
    if not comparison.best and not comparison.plain_fastest:
        return None
    by_bs: dict[int, list[str]] = {}
    for bs, name in comparison.best:
        by_bs.setdefault(bs, []).append(name)

    def figure(bs: int, name: str) -> str:
        row = comparison.run(name).row(bs)
        assert row is not None
        within = f", {interval_text(row.speedup_interval)}" if row.speedup_interval is not None else ""
        return f"{_ratio(row.speedup)}x{within}"
    parts = [f"bs {bs} {' and '.join(names)} ({figure(bs, names[0])})" for bs, names in by_bs.items()]
    if comparison.plain_fastest:
        sizes = ", ".join(map(str, comparison.plain_fastest))
        parts.append(f"no configuration pays at bs {sizes}: plain decoding is fastest there")
    return ("best: " if by_bs else "") + "; ".join(parts)


LEGEND = ("each run on its own clock (the one that bounds its decode iteration); accept*: not measured at that batch "
          "size (one figure over every batch size, or a log's mean, assumed there); iteration: the decode iteration's "
          "mean; draft: the draft model's share of it; per token: per request; tokens/s: the batch's; speedup, "
          "break-even (the accept length at which speedup is 1): against the plain run at that batch size; 95%: the "
          "speedup's interval; best: the largest speedup at that batch size; loses: slower than plain decoding (the "
          "interval below 1); fastest: plain decoding, where no configuration pays; can't tell: the interval holds 1; not comparable: a speculative iteration faster "
          "than a plain one")


def legend(comparison: Comparison) -> str:
    graph = common_graph(comparison)
    modes = "" if graph is None else f", every run {'CUDA graphs' if graph else 'eager'}"
    free = draft_free(comparison)
    unused = (f" (-: not a setting of {' and '.join(free)}: its algorithm runs no draft model, so it has no "
              "steps and no topk)") if free else ""
    return f"config: algorithm steps/topk/draft tokens{unused}{modes}; {LEGEND}"


def sweep_cells(comparison: Comparison) -> tuple[list[str], list[list[str]]] | None:
    """Per run and batch size, SGLang's sweep beside the trace: accept length and speed (tokens per
    second of one request), each with its ratio, trace over SGLang."""
    if comparison.sweep is None:
        return None
    header = ["run", "bs", "line", "accept", "SGLang accept", "accept ratio", "speed", "SGLang speed", "speed ratio",
              "step time"]
    rows = []
    for run in comparison.runs:
        for row in run.rows:
            match = row.sweep
            if match is None:
                continue
            rows.append([run.name, str(row.bs), str(match.line.line), _ratio(match.accept_length),
                         _ratio(match.line.acc_length), _ratio(match.accept_ratio), _rate(match.speed),
                         _rate(match.line.speed), _ratio(match.speed_ratio), _time(match.line.step_time * 1e6)])
    return header, rows


def sweep_lines(comparison: Comparison) -> list[str]:
    sweep = comparison.sweep
    if sweep is None:
        return []
    lines = [f"SGLang's sweep {sweep.source}: {sweep.matched} line{'s' if sweep.matched != 1 else ''} beside a run"
             + (f", {len(sweep.unmatched)} not:" if sweep.unmatched else "")]
    lines += [f"  {u.line.label}: {u.why}" for u in sweep.unmatched]
    return lines


SWEEP_LEGEND = ("accept: the trace's accept length, SGLang: bench_speculative's acc_length; speed: tokens per second "
                "of one request (1 / time per token on the run's clock; SGLang's: acc_length / step_time, its "
                "step time the 20th percentile of the server's decode steps at that batch size); ratio: trace / "
                "SGLang")


def budget_lines(comparison: Comparison) -> list[str]:
    """A summary line, then one line per budget that broke or was skipped, naming its run and batch size."""
    if not comparison.budgets:
        return []
    broken, skipped = comparison.broken, comparison.skipped
    held = len(comparison.budgets) - len(broken) - len(skipped)
    words = [f"{held} held"] + ([f"{len(broken)} broken"] if broken else []) + \
        ([f"{len(skipped)} skipped" + (" (allowed)" if comparison.allow_skipped else "")] if skipped else [])
    lines = [f"budgets, per run and batch size: {', '.join(words)}"]
    lines += [_outcome_line(outcome) for outcome in comparison.budgets if outcome.status in (BROKEN, SKIPPED)]
    return lines


def _outcome_line(outcome: Outcome) -> str:
    where = f"{outcome.run}" + ("" if outcome.bs is None else f" bs {outcome.bs}")
    detail = f": {outcome.detail}" if outcome.detail else ""
    return f"  {outcome.status}: {outcome.rule} at {where}: {outcome.figure}{detail}"


def compare_table(comparison: Comparison, width: int | None = None) -> Group:
    """The terminal's view, fitted to `width` columns (None: as wide as it is)."""
    parts: list = []
    whys = Whys()

    def add(title: str, header: list[str], rows: list[list[str]], leave_out: Collection[str],
            notes: list[str]) -> None:
        parts.extend(fitted_table(title, header, rows, width, leave_out)[0])
        parts.extend(Text(whole_reason(note), style="dim") for note in notes)

    header, rows = table_cells(comparison, whys)
    add(TITLE, header, rows, LEAVE_OUT, [*whys.lines(), legend(comparison)])
    parts.append(Text(""))
    best = best_line(comparison)
    if best:
        parts.append(Text(printable(best), style="bold"))
    parts.extend(Text(whole_reason(line)) for line in verdict_lines(comparison))
    sweep = sweep_cells(comparison)
    if sweep is not None:
        parts.append(Text(""))
        if sweep[1]:
            add("beside SGLang's sweep (bench_speculative.py)", *sweep, SWEEP_LEAVE_OUT, [SWEEP_LEGEND])
        parts.extend(Text(whole_reason(line)) for line in sweep_lines(comparison))
    budgets = budget_lines(comparison)
    if budgets:
        parts.append(Text(""))
        parts.extend(Text(whole_reason(line), style="bold" if k == 0 else "") for k, line in enumerate(budgets))
    return Group(*parts)


def compare_markdown(comparison: Comparison) -> str:
    """A CI job summary: the table with every column, the verdicts, the sweep, the budgets."""
    sections = ["### Which configuration pays most", "", markdown_table(*full_cells(comparison), left=FULL_TEXT), ""]
    sections += [f"> {markdown_text(LEGEND, whole=True)}", ""]
    best = best_line(comparison)
    if best:
        sections += [f"**{markdown_text(best, whole=True)}**", ""]
    sections += [f"- {markdown_text(line, whole=True)}" for line in verdict_lines(comparison)] + [""]
    sweep = sweep_cells(comparison)
    if sweep is not None:
        sections += ["#### Beside SGLang's sweep", ""]
        if sweep[1]:
            sections += [markdown_table(*sweep, left={"run"}), "", f"> {markdown_text(SWEEP_LEGEND, whole=True)}", ""]
        sections += [f"- {markdown_text(line.strip(), whole=True)}" for line in sweep_lines(comparison)] + [""]
    budgets = budget_lines(comparison)
    if budgets:
        sections += ["#### Budgets", ""] + [f"- {markdown_text(line.strip(), whole=True)}" for line in budgets] + [""]
    return "\n".join(sections).rstrip("\n") + "\n"


def compare_csv(comparison: Comparison) -> str:
    """One line per run and batch size, raw figures (microseconds, fractions), the why of a row not
    compared, and SGLang's sweep beside it (empty where no line matched)."""
    records = comparison.records()
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    columns = list(records[0]) if records else ["run", "bs"]
    writer.writerow(columns)
    for record in records:
        writer.writerow(csv_row(record.get(column) for column in columns))
    return out.getvalue()


def compare_messages(comparison: Comparison) -> list[str]:
    """The warnings and notes for standard error (in every format), grouped as stats groups them."""
    inputs = [source for run in comparison.runs for source in run.sources]
    return [*(f"warning: {line}" for line in grouped(comparison.warnings, inputs)),
            *(f"note: {line}" for line in grouped(comparison.notes, inputs))]

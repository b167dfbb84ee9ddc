"""SGLang's sweep (sweep.py) beside compare's rows: each line matched to the run of its settings and
the row of its batch size, or kept with why it matches none."""

from __future__ import annotations

from .comparison import SWEEP_ALGORITHM, ComparedRun
from .sweep import Sweep, SweepComparison, SweepLine, SweepMatch, Unmatched


def beside_sweep(sweep: Sweep, runs: list[ComparedRun]) -> SweepComparison:
    """Each sweep line matched to the run of its settings and the row of its batch size; a later line of
    the same configuration and batch size replaces an earlier one (the script appends)."""
    used: dict[tuple[int, int], SweepLine] = {}
    unmatched: list[Unmatched] = []
    unknown = [run.name for run in runs if run.sweep_key is None]
    for line in sweep.lines:
        same = [k for k, run in enumerate(runs) if run.sweep_key == line.settings]
        at_bs = [k for k in same if runs[k].row(line.batch_size) is not None]
        found = _narrowed(at_bs, runs)
        if not same:
            why = "no run has " + ("plain decoding" if line.plain else
                                   f"{line.steps} steps, topk {line.topk}, {line.num_draft_tokens} draft tokens")
            if unknown:
                why += (f" (the settings of {', '.join(unknown)} are unknown: server_args.json beside the traces "
                        "names them)")
            unmatched.append(Unmatched(line, why))
        elif not at_bs:
            sizes = "; ".join(f"{runs[k].name}: bs {_listed([r.bs for r in runs[k].rows if r.bs is not None]) or 'none'}"
                              for k in same)
            unmatched.append(Unmatched(line, f"no run of these settings has bs {line.batch_size} ({sizes})"))
        elif len(found) > 1:
            unmatched.append(Unmatched(line, f"runs {', '.join(runs[k].name for k in found)} have these settings and "
                                             "batch size alike: not matched to either"))
        else:
            earlier = used.get((found[0], line.batch_size))
            if earlier is not None:
                unmatched.append(Unmatched(earlier, f"line {line.line}, later, has the same configuration and batch "
                                                    "size: it is the one compared"))
            used[found[0], line.batch_size] = line
    for (k, bs), line in used.items():
        row = runs[k].row(bs)
        assert row is not None
        speed = 1e6 / row.per_token_us if row.per_token_us else None
        row.sweep = SweepMatch(line, row.accept_length, speed)
    unmatched.sort(key=lambda u: u.line.line)
    return SweepComparison(sweep.source, len(used), unmatched, list(sweep.problems))


def _listed(values: list) -> str:
    return ", ".join(map(str, values))


def _narrowed(found: list[int], runs: list[ComparedRun]) -> list[int]:
    """Of several runs a line can be, the ones launched as the script launches its servers
    (--speculative-algorithm EAGLE, CUDA graphs on), when any is: only then is a line ambiguous."""
    kept = [k for k in found if runs[k].plain or (runs[k].config is not None and runs[k].config.cuda_graph is not False
                                                  and runs[k].config.server_algorithm == SWEEP_ALGORITHM)]
    return kept if len(found) > 1 and kept else found

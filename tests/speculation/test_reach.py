"""How far speculation pays (issue 42 items 1 and 2): over several batch sizes the verdict names where
it pays and where it loses, estimates the crossover, and says what it would take to pay where it
loses (the draft model's budget, the accept length). Every figure is checked against the generator's
truth (tests/synth): the decode iterations' windows and kernels, whose work each kernel was, the
draft host time it marked and every request's accept length."""

import csv
import io
import json
import math
import re
from collections import defaultdict

import pytest
import synth
from click.testing import CliRunner
from test_report_browser import browser  # noqa: F401 (a fixture)

import spanfix
from spanfix.cli import main
from spanfix.render.speculation import verdict_line
from spanfix.report.compare_page import write_compare_page

SIZES = ((4, 1), (16, 2), (64, 3))  # batch size, seed
# The draft model's kernels take this many times their usual time at each batch size: the speculative
# iteration grows with it while the plain one stays, so the speedup falls from about 1.75x to 0.72x.
PAYS_PAYS_LOSES = (0.55, 1.1, 2.9)
BUDGET_CLOSE = 0.10  # the bound on draft_budget_us against the truth


def _spec(bs, seed, scale, algorithm="eagle"):
    return synth.SynthSpec(algorithm=algorithm, cuda_graph=True, detailed=True, decode_iterations=12, seed=seed,
                           batch_size=bs, draft_scale=scale, model="Qwen/Qwen3-8B")


def _put(folder, trace, name):
    folder.mkdir(parents=True, exist_ok=True)
    synth.write(trace, folder / name)
    (folder / "server_args.json").write_text(json.dumps(trace.server_args))
    return folder / name


def _truth(trace):
    """Per decode iteration's batch size, per clock: the means of the iteration, of the draft model's
    time in it, and the accept length over the requests the trace can tell."""
    kernels, drafts, hosts = defaultdict(list), defaultdict(float), defaultdict(float)
    for kernel in trace.kernels:
        if kernel.phase == "decode":
            kernels[kernel.iteration].append(kernel)
            if kernel.model == "draft":
                drafts[kernel.iteration] += (kernel.end_ns - kernel.start_ns) / 1000
    for mark in trace.draft_host:
        hosts[mark.iteration] += (mark.end_ns - mark.start_ns) / 1000
    decodes = [it for it in trace.iterations if it.phase == "decode"]
    found = {"cpu": ([(it.end_ns - it.start_ns) / 1000 for it in decodes], [hosts[it.number] for it in decodes])}
    if kernels:
        found["gpu"] = ([(max(k.end_ns for k in kernels[it.number]) - min(k.start_ns for k in kernels[it.number]))
                         / 1000 for it in decodes], [drafts[it.number] for it in decodes])
    accepts = [a for it in decodes if it.knowable for a in it.accepts]
    return {clock: (_mean(times), _mean(draft)) for clock, (times, draft) in found.items()}, \
        (_mean(accepts) if accepts else None)


def _mean(values):
    return sum(values) / len(values)


def _sweep(root, scales, algorithm="eagle", sizes=SIZES):
    """A run captured at each batch size (its draft model scaled), its plain twin at each: the folders, and
    per batch size the truth of both."""
    truth = {}
    for (bs, seed), scale in zip(sizes, scales):
        spec = _spec(bs, seed, scale, algorithm)
        trace, twin = synth.generate(spec), synth.generate(synth.plain_twin(spec))
        _put(root / "spec", trace, f"spec-bs{bs}-TP-0.trace.json")
        _put(root / "plain", twin, f"plain-bs{bs}-TP-0.trace.json")
        truth[bs] = (_truth(trace), _truth(twin)[0])
    return root / "spec", root / "plain", truth


def _stats(spec, plain):
    traces = sorted(str(path) for path in spec.glob("*.trace.json"))
    twins = sorted(str(path) for path in plain.glob("*.trace.json"))
    return spanfix.stats(traces, baseline=twins), traces, twins


def run(*args, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], **kwargs)


def _first_line(output):
    return next(line for line in output.splitlines() if line.startswith("speculation ") and "plain decoding" in line)


@pytest.fixture(scope="module")
def crossing(tmp_path_factory):
    return _sweep(tmp_path_factory.mktemp("crossing"), PAYS_PAYS_LOSES)


def test_pays_pays_loses_names_16_and_64_and_a_crossover_between(crossing):
    spec, plain, _ = crossing
    result, traces, twins = _stats(spec, plain)
    verdict = result.speculation.verdict
    reach = verdict.reach
    assert verdict.clock == "gpu" and verdict.batch_sizes == (4, 16, 64)
    assert reach.clock == verdict.clock
    assert reach.pays_up_to == 16 and reach.loses_from == 64
    assert [p.bs for p in reach.pays_at] == [4, 16] and [p.bs for p in reach.loses_at] == [64]
    assert reach.cannot_tell_at == ()
    assert 16 < reach.crossover < 64
    # linear in log bs between the two measured points, as the method says
    low, high = reach.pays_at[-1], reach.loses_at[0]
    share = (math.log(reach.crossover) - math.log(16)) / (math.log(64) - math.log(16))
    assert low.speedup + share * (high.speedup - low.speedup) == pytest.approx(1.0, abs=1e-9)
    assert reach.crossover_method == "linear in log bs between bs 16 and bs 64"
    # each side's figures are its batch size's own, with the interval the verdict computes
    rows = {row.bs: row for row in result.speculation.rows}
    for point in (*reach.pays_at, *reach.loses_at):
        assert point.speedup == rows[point.bs].speedup["gpu"]
        assert point.interval == rows[point.bs].speedup_interval["gpu"]
    assert all(p.interval[0] > 1 for p in reach.pays_at) and all(p.interval[1] < 1 for p in reach.loses_at)
    # the first line says both, before any pooled figure
    line = verdict_line(result.speculation)
    assert line.startswith(f"speculation pays up to bs 16 ({rows[4].speedup['gpu']:.2f}x at "
                           f"4, {rows[16].speedup['gpu']:.2f}x at 16), loses from bs 64 ({high.speedup:.2f}x); "
                           f"crossover near bs {reach.crossover:.0f} (linear in log bs between bs 16 and bs 64); "
                           "to pay at bs 64 the draft model must take under ")
    assert line.index("pooled over bs 4, 16, 64: ") > line.index("loses from bs 64")
    printed = _first_line(run("stats", *traces, *[a for t in twins for a in ("--baseline", t)],
                              terminal_width=200).stdout)
    assert " ".join(printed.split()).startswith("speculation pays up to bs 16 (")
    document = json.loads(run("stats", *traces, *[a for t in twins for a in ("--baseline", t)], "--format",
                              "json").stdout)["speculation"]["verdict"]
    assert document["reach"]["pays_up_to"] == 16 and document["reach"]["loses_from"] == 64
    assert document["reach"]["crossover"] == pytest.approx(reach.crossover, abs=0.01)
    assert [p["bs"] for p in document["reach"]["pays_at"]] == [4, 16]
    assert document["reach"]["loses_at"][0]["speedup_interval"] == pytest.approx(list(high.interval), abs=1e-4)
    assert document["to_pay"]["bs"] == 64


def test_compare_gives_the_run_the_same_reach(crossing):
    spec, plain, _ = crossing
    result, _, _ = _stats(spec, plain)
    ours = result.speculation.verdict.reach
    comparison = spanfix.compare([spec, plain])
    theirs = comparison.run("spec").verdict.reach
    assert theirs == ours
    document = json.loads(run("compare", spec, plain, "--format", "json").stdout)
    found = next(r for r in document["runs"] if r["name"] == "spec")["verdict"]["reach"]
    assert found == ours.to_json()
    text = run("compare", spec, plain, terminal_width=200).stdout
    assert "spec: speculation pays up to bs 16 (" in " ".join(text.split())
    markdown = run("compare", spec, plain, "--format", "markdown").stdout
    assert "spec\\: speculation pays up to bs 16 (" in markdown and "loses from bs 64" in markdown
    records = list(csv.DictReader(io.StringIO(run("compare", spec, plain, "--format", "csv").stdout)))
    mine = [r for r in records if r["run"] == "spec"]
    assert {(r["reach_pays_up_to"], r["reach_loses_from"]) for r in mine} == {("16", "64")}
    assert float(mine[0]["reach_crossover"]) == pytest.approx(ours.crossover, abs=0.01)
    assert all(r["draft_budget_us"] and r["draft_us"] for r in mine)
    # the page draws the crossover: its payload carries it
    from spanfix.report.compare_page import compare_payload
    payload = compare_payload(comparison)
    assert next(r for r in payload["runs"] if r["name"] == "spec")["reach"]["crossover"] == round(ours.crossover, 2)


def test_draft_budget_at_each_batch_size_is_the_truth(crossing):
    spec, plain, truth = crossing
    result, _, _ = _stats(spec, plain)
    rows = {row.bs: row for row in result.speculation.rows}
    for bs, ((ours, accept), theirs) in truth.items():
        row = rows[bs]
        for clock in ("cpu", "gpu"):
            iteration, draft = ours[clock]
            plain_iteration, _ = theirs[clock]
            expected = accept * plain_iteration - (iteration - draft)
            assert row.draft_us[clock] == pytest.approx(draft, rel=0.01), (bs, clock)
            assert row.draft_budget_us[clock] == pytest.approx(expected, rel=BUDGET_CLOSE), (bs, clock)
            # the budget is where the speedup would be 1: the iteration with that draft time, against the plain one
            budget = row.draft_budget_us[clock]
            would = row.accept_length * row.plain_iteration_us[clock] / (
                row.iteration_us[clock] - row.draft_us[clock] + budget)
            assert would == pytest.approx(1.0, abs=1e-9)
    lever = result.speculation.verdict.lever
    assert lever.bs == 64 and lever.clock == "gpu"
    assert lever.draft_budget_us == rows[64].draft_budget_us["gpu"] and lever.draft_us == rows[64].draft_us["gpu"]
    assert lever.break_even == rows[64].break_even["gpu"] and lever.draft_budget_us < lever.draft_us
    line = verdict_line(result.speculation)
    assert (f"to pay at bs 64 the draft model must take under {spanfix.timing.format_us(lever.draft_budget_us)} per "
            f"decode iteration (now {spanfix.timing.format_us(lever.draft_us)}), or accept over "
            f"{lever.break_even:.2f} tokens (now {rows[64].accept_length:.2f})") in line
    document = json.loads(json.dumps(result.speculation.to_json()))
    for found in document["by_bs"]:
        assert found["gpu"]["draft_budget_us"] == pytest.approx(rows[found["bs"]].draft_budget_us["gpu"], abs=1e-3)
        assert found["gpu"]["draft_us"] == pytest.approx(rows[found["bs"]].draft_us["gpu"], abs=1e-3)


def test_the_report_has_a_card_of_how_far_it_pays(crossing):
    from spanfix.report.speculation import _speculation

    spec, plain, _ = crossing
    result, _, _ = _stats(spec, plain)
    cards = dict(_speculation(result.speculation)["cards"])
    assert cards["how far it pays (device, bs 4, 16, 64)"] == "pays up to bs 16; loses from bs 64"
    reach = result.speculation.verdict.reach
    assert cards["crossover, speedup 1 (device, bs 16 to 64: linear in log bs)"] == f"bs {reach.crossover:.0f}"
    lever = result.speculation.verdict.lever
    format_us = spanfix.timing.format_us
    assert cards[f"to pay, the draft model's time per decode iteration (device, bs 64; now {format_us(lever.draft_us)})"] \
        == f"under {format_us(lever.draft_budget_us)}"
    assert cards[f"to pay, the accept length (device, bs 64; now {lever.accept_length:.2f})"] == \
        f"over {lever.break_even:.2f}"


@pytest.mark.parametrize("case, scales, expected", [
    ("pays everywhere", (0.55, 0.55, 0.55), (64, None, [4, 16, 64], [], [])),
    ("loses everywhere", (2.9, 2.9, 2.9), (None, 4, [], [4, 16, 64], [])),
    ("cannot tell at the larger sizes", (0.55, 1.76, 1.76), (4, None, [4], [], [16, 64])),
])
def test_a_side_not_measured_is_null(tmp_path, case, scales, expected):
    spec, plain, _ = _sweep(tmp_path, scales)
    result, _, _ = _stats(spec, plain)
    verdict = result.speculation.verdict
    reach = verdict.reach
    pays_up_to, loses_from, pays, loses, cannot = expected
    assert (reach.pays_up_to, reach.loses_from) == (pays_up_to, loses_from)
    assert [p.bs for p in reach.pays_at] == pays and [p.bs for p in reach.loses_at] == loses
    assert [p.bs for p in reach.cannot_tell_at] == cannot
    assert reach.crossover is None and reach.crossover_method is None
    document = verdict.to_json()["reach"]
    assert document["crossover"] is None and (document["pays_up_to"], document["loses_from"]) == (pays_up_to, loses_from)
    line = verdict_line(result.speculation)
    if case == "pays everywhere":  # the answer does not change: the line is the pooled verdict, as before
        assert not reach.changes and verdict.lever is None
        assert line.startswith("speculation pays: ") and "at bs 4, 16, 64 (" in line and "to pay" not in line
    elif case == "loses everywhere":
        assert not reach.changes and verdict.lever.bs == 4
        assert line.startswith("speculation does not pay: ") and "; to pay at bs 4 the draft model must take under " \
            in line
    else:
        assert reach.changes and verdict.lever is None
        rows = {row.bs: row for row in result.speculation.rows}
        low, high = rows[16].speedup_interval["gpu"]
        assert low < 1 < high
        assert line.startswith(f"speculation pays up to bs 4 ({rows[4].speedup['gpu']:.2f}x); it can't tell at bs 16, "
                               f"64 ({rows[16].speedup['gpu']:.2f}x, {low:.2f}\u2013{high:.2f} at 16, ")
        assert "; it loses at no batch size measured; pooled over bs 4, 16, 64: " in line


def test_one_batch_size_has_no_reach_and_its_line_is_as_before(tmp_path):
    spec, plain, _ = _sweep(tmp_path, (0.55,), sizes=((16, 2),))
    result, _, _ = _stats(spec, plain)
    verdict = result.speculation.verdict
    assert verdict.batch_sizes == (16,) and verdict.reach is None and verdict.lever is None
    assert verdict.to_json()["reach"] is None and verdict.to_json()["to_pay"] is None
    low, high = verdict.speedup_interval
    be_low, be_high = verdict.break_even_interval
    assert verdict_line(result.speculation) == (
        f"speculation pays: {verdict.speedup:.2f}x ({low:.2f}\u2013{high:.2f}) plain decoding at bs 16 ({verdict.why}); "
        f"break-even accept length {verdict.break_even:.2f} ({be_low:.2f}\u2013{be_high:.2f}), accepted "
        f"{verdict.accept_length:.2f} (trace annotations)")


def test_one_batch_size_that_loses_says_the_lever(tmp_path):
    spec, plain, _ = _sweep(tmp_path, (2.9,), sizes=((64, 3),))
    result, _, _ = _stats(spec, plain)
    verdict = result.speculation.verdict
    assert verdict.reach is None and verdict.pays is False and verdict.lever.bs == 64
    line = verdict_line(result.speculation)
    assert re.search(r"\(trace annotations\); to pay at bs 64 the draft model must take under [0-9.]+ us per decode "
                     r"iteration \(now [0-9.]+ (us|ms)\), or accept over [0-9.]+ tokens \(now [0-9.]+\)$", line), line


def test_no_draft_model_no_draft_budget(tmp_path):
    """NGRAM runs no draft model: on the device nothing is the draft's, so draft_us and its budget are
    null, and the lever is the accept length alone."""
    spec, plain, _ = _sweep(tmp_path, (1.0, 1.0), algorithm="ngram", sizes=((4, 1), (16, 2)))
    result, _, _ = _stats(spec, plain)
    for row in result.speculation.rows:
        assert row.draft_us["gpu"] is None and row.draft_budget_us["gpu"] is None
        assert row.to_json()["gpu"]["draft_budget_us"] is None
    from spanfix.render.reach import lever_text
    from spanfix.speculation.reach import Lever

    assert lever_text(Lever(16, "gpu", 1.3, None, 1.1, None, None)) == \
        "to pay at bs 16 it must accept over 1.30 tokens (now 1.10)"
    assert lever_text(Lever(16, "gpu", 3.0, None, 1.1, -5.0, 40.0)).startswith(
        "to pay at bs 16 it must accept over 3.00 tokens (now 1.10): even a draft model that took no time would not pay")


def test_the_compare_page_rings_the_crossover_on_the_line_at_1(crossing, browser, tmp_path):  # noqa: F811
    """In headless Chromium: the ring sits on the reference line at 1, between the points of bs 16 and
    64, where log-linear interpolation puts it; its tooltip says the estimate and its method."""
    from test_report_browser import Opened

    spec, plain, _ = crossing
    comparison = spanfix.compare([spec, plain])
    reach = comparison.run("spec").verdict.reach
    path = tmp_path / "compare.html"
    write_compare_page(comparison, path)
    page = Opened(browser, path)
    try:
        assert page.errors == [] and page.requests == [page.url]
        found = page.page.evaluate("""() => {
          const svg = document.querySelector('svg[data-chart=compare-speedup]');
          const center = el => { const b = el.getBoundingClientRect(); return [b.x + b.width / 2, b.y + b.height / 2]; };
          const ring = svg.querySelector('g.crossover circle');
          return {rings: svg.querySelectorAll('g.crossover').length, ring: center(ring),
                  title: svg.querySelector('g.crossover title').textContent,
                  reference: center(svg.querySelector('line.reference')),
                  points: Array.from(svg.querySelectorAll('g.point')).map(g => [+g.dataset.bs, center(g.firstElementChild)]),
                  legend: Array.from(svg.parentNode.querySelectorAll('ul.legend li')).map(li => li.textContent)};
        }""")
    finally:
        page.close()
    assert found["rings"] == 1
    (x, y), reference_y = found["ring"], found["reference"][1]
    assert y == pytest.approx(reference_y, abs=1.0)
    at = {bs: center for bs, center in found["points"]}
    share = (math.log(reach.crossover) - math.log(16)) / (math.log(64) - math.log(16))
    assert at[16][0] < x < at[64][0]
    assert x == pytest.approx(at[16][0] + share * (at[64][0] - at[16][0]), abs=1.0)
    assert f"crossover near bs {reach.crossover:.1f}" in found["title"] and "linear in log bs" in found["title"]
    assert any(item.startswith("crossover: speedup 1") for item in found["legend"])


@pytest.mark.parametrize("scales, crossed", [((2.9, 0.55, 0.55), True), ((2.9, 0.55, 2.9), False)])
def test_losing_below_paying_crosses_the_other_way_and_interleaved_sizes_do_not_cross(tmp_path, scales, crossed):
    """Loses at bs 4, pays at 16 and 64: the crossover lies between 4 and 16 and the line says it loses up
    to 4 and pays from 16 (pays_up_to and loses_from keep their meaning: 64 and 4). Loses at 4 and 64,
    pays at 16: no one crossover, and the line says why."""
    spec, plain, _ = _sweep(tmp_path, scales)
    result, _, _ = _stats(spec, plain)
    reach = result.speculation.verdict.reach
    rows = {row.bs: row for row in result.speculation.rows}
    line = verdict_line(result.speculation)
    assert reach.changes and reach.loses_from == 4 and result.speculation.verdict.lever.bs == 4
    if crossed:
        assert (reach.pays_up_to, [p.bs for p in reach.loses_at]) == (64, [4])
        assert 4 < reach.crossover < 16
        assert reach.crossover_method == "linear in log bs between bs 4 and bs 16 (it loses below, pays above)"
        assert line.startswith(f"speculation loses up to bs 4 ({rows[4].speedup['gpu']:.2f}x), pays from bs 16 "
                               f"({rows[16].speedup['gpu']:.2f}x at 16, {rows[64].speedup['gpu']:.2f}x at 64); "
                               f"crossover near bs {reach.crossover:.0f} (linear in log bs between bs 4 and bs 16")
    else:
        assert (reach.pays_up_to, [p.bs for p in reach.loses_at]) == (16, [4, 64]) and reach.crossover is None
        assert line.startswith(f"speculation pays at bs 16 ({rows[16].speedup['gpu']:.2f}x), loses at bs 4, 64 (")
        assert "; no crossover: the answer changes more than once with the batch size" in line


def test_an_accept_length_beyond_the_draft_tokens_is_said_to_be_out_of_reach():
    """The lever never offers an accept length no request can reach (above the draft tokens) as if it
    were one to aim for: the real STANDALONE capture needs 4.14 of its 4 draft tokens."""
    from spanfix.render.reach import lever_text
    from spanfix.speculation.reach import Lever

    lever = Lever(4, "cpu", 4.14, (3.66, 4.60), 1.29, 535.8, 16670.0)
    assert lever_text(lever, 4).endswith("or accept over 4.14 tokens (now 1.29), more than its 4 draft tokens allow")
    assert lever_text(lever, 8).endswith("or accept over 4.14 tokens (now 1.29)")
    assert lever_text(lever).endswith("or accept over 4.14 tokens (now 1.29)")


def test_the_reports_accept_length_card_says_it_is_beyond_the_draft_tokens():
    """The report's 'to pay, the accept length' card says what the verdict line says: over 4.14, more
    than the 4 draft tokens allow."""
    from spanfix.render.reach import reach_cards
    from spanfix.speculation.reach import Lever
    from spanfix.speculation.verdict import Verdict

    lever = Lever(4, "cpu", 4.14, (3.66, 4.60), 1.29, 535.8, 16670.0)
    verdict = Verdict("cpu", "the host clock alone", speedup=0.31, break_even=4.14, accept_length=1.29, lever=lever)
    cards = dict(reach_cards(verdict, 4))
    assert cards["to pay, the accept length (host, bs 4; now 1.29)"] == "over 4.14, more than its 4 draft tokens allow"
    assert dict(reach_cards(verdict, 8))["to pay, the accept length (host, bs 4; now 1.29)"] == "over 4.14"

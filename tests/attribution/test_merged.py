"""Merging ranks changes nothing: SGLang's profile merger concatenates the ranks' events, prefixes every
pid with the rank's label and renumbers no id, so External ids and correlation ids collide across ranks.
A merged trace must give every event the name its rank's own file gets, and the same figures."""

import json
from pathlib import Path

import pytest
import synth

from spanfix.attribution.analyse import RelabelOptions
from spanfix.checking.rules import CheckOptions, parse_budget, run_check
from spanfix.relabelling.write import relabel_file
from spanfix.timing import aggregate, measure_files

OPTIONS = RelabelOptions()
# Varied ranks run different batches (as DP ranks do), so one id names different work in each rank.
#         algorithm    graph  annotations ranks kinds                shuffled varied
CASES = [("eagle",     True,  True,  2, ("TP",),             False, False),
         ("eagle",     True,  False, 4, ("TP",),             True,  True),
         ("eagle",     False, True,  2, synth.RANK_KINDS,    True,  True),
         ("eagle",     False, False, 2, ("TP", "DP"),        False, False),
         ("mtp",       True,  False, 2, ("TP",),             False, True),
         ("frozen-kv", True,  True,  2, ("TP", "PP", "EP"),  True,  False),
         ("dflash",    False, False, 4, ("TP",),             False, True),
         ("eagle-v1",  False, True,  2, synth.RANK_KINDS,    False, True)]


def _ids(trace, key):
    return {event["args"][key] for event in trace.events
            if isinstance(event.get("args"), dict) and key in event["args"] and event.get("cat") != "python_function"}


def _file_name(kinds, rank):
    indexes = {"TP": rank, "DP": 0, "PP": 0, "EP": 0}
    return "prof-" + "-".join(f"{kind}-{indexes[kind]}" for kind in kinds) + ".trace.json"


@pytest.fixture(params=CASES, ids=lambda c: f"{c[0]}-{'graph' if c[1] else 'eager'}-"
                                             f"{'ann' if c[2] else 'kernels'}-{c[3]}r-{'+'.join(c[4])}"
                                             f"{'-shuffled' if c[5] else ''}{'-varied' if c[6] else ''}")
def captured(request, tmp_path):
    """Per-rank files named as SGLang names them, and their merge (maybe shuffled), as the merger writes it."""
    algorithm, graph, annotations, count, kinds, shuffled, varied = request.param
    spec = synth.SynthSpec(algorithm=algorithm, cuda_graph=graph, gpu_annotations=annotations, decode_iterations=4)
    ranks = synth.generate_ranks(spec, count, varied=varied)
    # The ranks' id counters start alike, as real ones do: without scoping every join would cross ranks.
    assert _ids(ranks[0], "External id") & _ids(ranks[1], "External id")
    assert _ids(ranks[0], "correlation") & _ids(ranks[1], "correlation")
    rank_files = []
    for rank, trace in enumerate(ranks):
        rank_files.append(tmp_path / _file_name(kinds, rank))
        synth.write(trace, rank_files[-1])
    merged = synth.merge(ranks, kinds)
    origin = [(rank, j) for rank, trace in enumerate(ranks) for j in range(len(trace.events))]
    if shuffled:
        position = {id(event): k for k, event in enumerate(merged.events)}
        merged = synth.shuffle(merged, seed=5)
        origin = [origin[position[id(event)]] for event in merged.events]
    merged_file = tmp_path / "merged-prof.trace.json"
    synth.write(merged, merged_file)
    return rank_files, merged_file, origin


def _names(path: Path) -> list:
    return [event.get("name") for event in json.loads(path.read_bytes())["traceEvents"]]


def test_every_event_gets_the_name_its_rank_gives_it(captured, tmp_path):
    rank_files, merged_file, origin = captured
    rank_names = []
    for path in rank_files:
        relabel_file(str(path), str(tmp_path / f"out-{path.name}"), OPTIONS)
        rank_names.append(_names(tmp_path / f"out-{path.name}"))
    result = relabel_file(str(merged_file), str(tmp_path / "out-merged.json"), OPTIONS)
    merged_names = _names(tmp_path / "out-merged.json")
    assert merged_names == [rank_names[rank][j] for rank, j in origin]
    assert result.changed > 0 and not result.ambiguous


def _json(paths, by):
    measures, errors = measure_files([str(p) for p in paths], OPTIONS, device=True)
    assert not errors
    return aggregate(measures, by).to_json()


def test_stats_by_rank_equal_each_rank_measured_alone(captured):
    rank_files, merged_file, _ = captured
    merged = _json([merged_file], ["rank"])
    alone = _json(rank_files, ["rank"])
    assert {row["rank"] for row in merged["stages"]} == {f"TP{r}" for r in range(len(rank_files))}
    assert any(row["clock"] == "gpu" for row in merged["stages"])
    assert merged["stages"] == alone["stages"]  # every row, every figure, to the nanosecond
    assert merged["iterations"] == alone["iterations"] and len(merged["iterations"]) == 2 * len(rank_files)
    assert not [w for w in merged["warnings"] if "not used" in w or "not joined" in w]


def test_stats_of_the_merge_equal_the_ranks_together(captured):
    rank_files, merged_file, _ = captured
    merged, together = _json([merged_file], []), _json(rank_files, [])
    assert merged["stages"] == together["stages"] and merged["iterations"] == together["iterations"]


def test_check_reaches_the_same_verdicts(captured):
    rank_files, merged_file, _ = captured
    budgets = tuple(parse_budget(text) for text in (
        "VERIFY.mean<=1s", "VERIFY.gpu.p90<=50us", "EXTEND.gpu.max>=1us", "DRAFT.share<=0.5", "iteration.mean<=1ms"))
    merged = run_check([str(merged_file)], OPTIONS, CheckOptions(budgets))
    alone = run_check([str(p) for p in rank_files], OPTIONS, CheckOptions(budgets))
    assert merged.passed == alone.passed

    def by_rule(report, kind):
        return [(o.rule, o.held, o.value) for o in report.outcomes if o.kind == kind]
    assert by_rule(merged, "budget") == by_rule(alone, "budget")
    assert {held for _, held, _ in by_rule(merged, "budget")} == {True, False}  # a test that can fail both ways
    trust = by_rule(merged, "trust")
    assert [(rule, held) for rule, held, _ in trust] == [("has step spans", True), ("no ambiguous step spans", True),
                                                        ("no conflicting evidence", True)]


def test_cli_stats_by_rank_on_a_merged_trace(captured):
    from click.testing import CliRunner

    from spanfix.cli import main
    rank_files, merged_file, _ = captured
    out = CliRunner().invoke(main, ["stats", str(merged_file), "--by", "rank", "--device", "--format", "json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["stages"] == _json(rank_files, ["rank"])["stages"]


# ---------------------------------------------------------------------------------------------------
# Physical sanity: a join that would break causality or pick one of several owners is not made


def _run(*args):
    from click.testing import CliRunner

    from spanfix.cli import main
    return CliRunner().invoke(main, [str(a) for a in args])


def _trace(tmp_path, events):
    from conftest import write_trace
    return write_trace(tmp_path / "t.json", events)


def test_device_work_before_its_launch_is_not_used(tmp_path):
    from conftest import span, thread_name
    events = [thread_name(1, 2, "draft worker"),
              span("step[DECODE bs=2]", 100, 50, tid=2), span("step[DECODE bs=2]", 200, 50, tid=2),
              span("cudaLaunchKernel", 110, 2, tid=2, cat="cuda_runtime", correlation=1),
              span("k", 105, 10, pid=0, tid=7, cat="kernel", correlation=1),  # 5 us before its launch
              span("cudaLaunchKernel", 210, 2, tid=2, cat="cuda_runtime", correlation=2),
              span("k", 215, 10, pid=0, tid=7, cat="kernel", correlation=2)]
    result = json.loads(_run("stats", _trace(tmp_path, events), "--format", "json").stdout)
    [gpu] = [row for row in result["stages"] if row["clock"] == "gpu"]
    assert (gpu["count"], gpu["total_us"]) == (1, 10)  # only the second step has device time
    assert any("1 launches whose device work starts before the launch" in w for w in result["warnings"])


def test_a_correlation_id_on_two_launches_is_not_used(tmp_path):
    from conftest import span, thread_name
    events = [thread_name(1, 2, "draft worker"), span("step[DECODE bs=2]", 100, 50, tid=2),
              span("cudaLaunchKernel", 110, 2, tid=2, cat="cuda_runtime", correlation=1),
              span("cudaLaunchKernel", 120, 2, tid=3, cat="cuda_runtime", correlation=1),
              span("k", 130, 10, pid=0, tid=7, cat="kernel", correlation=1)]
    result = json.loads(_run("stats", _trace(tmp_path, events), "--format", "json").stdout)
    assert [row["clock"] for row in result["stages"]] == ["cpu"]
    assert any("correlation ids that several launches of one rank share" in w for w in result["warnings"])


def test_a_gpu_copy_before_its_cpu_span_is_not_joined(tmp_path):
    from conftest import span
    name = "step[TARGET_VERIFY bs=2]"
    events = [span(name, 100, 50, ext=7), span(name, 90, 20, pid=0, tid=7, cat="gpu_user_annotation", ext=7)]
    path = _trace(tmp_path, events)
    relabelled = json.loads(_run("relabel", path, "--algorithm", "eagle", "--dry-run", "--json").stdout)["files"][0]
    assert relabelled["changed"] == 1 and relabelled["gpu_copies"] == 0
    [orphan] = relabelled["ambiguous_spans"]
    assert orphan["ts"] == 90 and "starts before the CPU step span" in orphan["why"]
    stats = json.loads(_run("stats", path, "--algorithm", "eagle", "--format", "json").stdout)
    assert [row["clock"] for row in stats["stages"]] == ["cpu"]
    assert any("1 GPU step annotations: it starts before" in w for w in stats["warnings"])
    inspected = json.loads(_run("inspect", path, "--algorithm", "eagle", "--json").stdout)["files"][0]
    assert any("starts before" in w for w in inspected["warnings"])
    checked = _run("check", path, "--algorithm", "eagle")
    assert checked.exit_code == 1 and "starts before" in checked.output


def test_an_external_id_two_cpu_spans_share_joins_neither(tmp_path):
    from conftest import span, thread_name
    events = [thread_name(1, 2, "draft worker"),
              span("step[TARGET_VERIFY bs=2]", 100, 50, tid=1, ext=7), span("step[TARGET_VERIFY bs=2]", 100, 50, tid=2, ext=7),
              span("step[TARGET_VERIFY bs=2]", 110, 20, pid=0, tid=7, cat="gpu_user_annotation", ext=7)]
    result = json.loads(_run("relabel", _trace(tmp_path, events), "--dry-run", "--json").stdout)["files"][0]
    assert result["gpu_copies"] == 0
    assert [span["why"] for span in result["ambiguous_spans"]] == [
        "GPU annotation: its External id is shared by several CPU step spans, so it identifies none (not joined)"]

"""The algorithm table (spanfix/attribution/algorithms.py), row by row: for every algorithm, each kind
of evidence its trace or server_args.json can show, and the candidates that evidence leaves; then the
facts stats and the speculation figures take from the table. Adding an algorithm is its row in the
table and its rows here (the last tests fail until it has them)."""

import pytest
from conftest import span, write_trace

from spanfix.attribution.algorithms import ALGORITHMS, ORDERED, SGLANG_NAMES, algorithm_name
from spanfix.attribution.analyse import RelabelOptions, read
from spanfix.attribution.attribute import attribute
from spanfix.attribution.index import build_index
from spanfix.speculation.accept import algorithm_blocks

EVERY = frozenset(ALGORITHMS)
# What the evidence leaves, written out here rather than taken from the table.
V2_EXTEND = {"eagle", "eagle3", "nextn", "standalone", "mtp"}  # a DRAFT_EXTEND_V2 span
STAGE_SPANS = {"eagle", "eagle3", "nextn", "standalone", "frozen-kv"}  # draft/draft_extend stage spans
DRAFT_DECODES = {"eagle", "eagle3", "nextn", "standalone", "eagle-v1", "frozen-kv"}  # DECODE beside TARGET_VERIFY
ONE_VERIFY = {"eagle", "eagle3", "nextn", "standalone", "eagle-v1", "mtp", "frozen-kv", "ngram"}  # per iteration
TWO_VERIFIES = {"dflash", "dspark"}  # of equal bs per iteration: the draft's, then the target's

SERVER_ARGS = {
    "eagle": {"speculative_algorithm": "EAGLE"}, "eagle3": {"speculative_algorithm": "EAGLE3"},
    "nextn": {"speculative_algorithm": "NEXTN"}, "standalone": {"speculative_algorithm": "STANDALONE"},
    "eagle-v1": {"speculative_algorithm": "EAGLE"},
    "mtp": {"speculative_algorithm": "EAGLE", "enable_multi_layer_eagle": True},
    "frozen-kv": {"speculative_algorithm": "FROZEN_KV_MTP"}, "dflash": {"speculative_algorithm": "DFLASH"},
    "dspark": {"speculative_algorithm": "DSPARK"}, "ngram": {"speculative_algorithm": "NGRAM"},
    "none": {"speculative_algorithm": None},
}
SRC = "/usr/lib/python3/site-packages/sglang/srt"
WORKER_FRAMES = {
    "eagle": f"{SRC}/speculative/eagle_worker_v2.py(410): forward_batch_generation",
    "eagle3": f"{SRC}/speculative/eagle_worker_v2.py(410): forward_batch_generation",
    "nextn": f"{SRC}/speculative/eagle_worker_v2.py(410): forward_batch_generation",
    "standalone": f"{SRC}/speculative/standalone_worker_v2.py(60): forward_batch_generation",
    "eagle-v1": f"{SRC}/speculative/eagle_worker.py(290): forward_batch_speculative_generation",
    "mtp": f"{SRC}/speculative/multi_layer_eagle_worker_v2.py(200): forward_batch_generation",
    "frozen-kv": f"{SRC}/speculative/frozen_kv_mtp_worker.py(150): forward_batch_generation",
    "dflash": f"{SRC}/speculative/dflash_worker.py(120): forward_batch_generation",
    "dspark": f"{SRC}/dspark_components/dspark_worker.py(90): forward_batch_generation",
    "ngram": f"{SRC}/speculative/ngram_worker.py(70): forward_batch_generation",
}

# (algorithm, evidence, the candidates it leaves). Evidence: what a capture of that algorithm shows.
ROWS = [
    *[(name, "--algorithm", {name}) for name in sorted(ALGORITHMS)],
    ("eagle", "server_args.json", {"eagle", "eagle-v1"}),
    ("eagle3", "server_args.json", {"eagle3", "eagle-v1"}),
    ("nextn", "server_args.json", {"nextn", "eagle-v1"}),
    ("standalone", "server_args.json", {"standalone", "eagle-v1"}),
    ("eagle-v1", "server_args.json", {"eagle", "eagle-v1"}),  # SGLang names EAGLE alike before and after v2
    ("mtp", "server_args.json", {"mtp"}),
    ("frozen-kv", "server_args.json", {"frozen-kv"}),
    ("dflash", "server_args.json", {"dflash"}),
    ("dspark", "server_args.json", {"dspark"}),
    ("ngram", "server_args.json", {"ngram"}),
    ("none", "server_args.json", {"none"}),
    ("eagle", "worker frame", EVERY),  # the EAGLE workers' files name no one algorithm
    ("eagle3", "worker frame", EVERY),
    ("nextn", "worker frame", EVERY),
    ("eagle-v1", "worker frame", EVERY),
    ("standalone", "worker frame", {"standalone"}),
    ("mtp", "worker frame", {"mtp"}),
    ("frozen-kv", "worker frame", {"frozen-kv"}),
    ("dflash", "worker frame", {"dflash"}),
    ("dspark", "worker frame", {"dspark"}),
    ("dspark", "worker folder", {"dspark"}),  # any frame in dspark_components/
    ("ngram", "worker frame", {"ngram"}),
    ("eagle", "DRAFT_EXTEND_V2 span", V2_EXTEND),
    ("eagle3", "DRAFT_EXTEND_V2 span", V2_EXTEND),
    ("nextn", "DRAFT_EXTEND_V2 span", V2_EXTEND),
    ("standalone", "DRAFT_EXTEND_V2 span", V2_EXTEND),
    ("mtp", "DRAFT_EXTEND_V2 span", V2_EXTEND),
    ("eagle-v1", "DRAFT_EXTEND span", {"eagle-v1"}),
    ("frozen-kv", "DRAFT_LOOP span", {"frozen-kv"}),
    ("eagle", "stage spans", STAGE_SPANS),
    ("eagle3", "stage spans", STAGE_SPANS),
    ("nextn", "stage spans", STAGE_SPANS),
    ("standalone", "stage spans", STAGE_SPANS),
    ("frozen-kv", "stage spans", STAGE_SPANS),
    ("eagle", "DECODE beside TARGET_VERIFY", DRAFT_DECODES),
    ("eagle3", "DECODE beside TARGET_VERIFY", DRAFT_DECODES),
    ("nextn", "DECODE beside TARGET_VERIFY", DRAFT_DECODES),
    ("standalone", "DECODE beside TARGET_VERIFY", DRAFT_DECODES),
    ("eagle-v1", "DECODE beside TARGET_VERIFY", DRAFT_DECODES),
    ("frozen-kv", "DECODE beside TARGET_VERIFY", DRAFT_DECODES),
    *[(name, "one TARGET_VERIFY per iteration", ONE_VERIFY) for name in sorted(ONE_VERIFY)],
    ("dflash", "two TARGET_VERIFY per iteration", TWO_VERIFIES),
    ("dspark", "two TARGET_VERIFY per iteration", TWO_VERIFIES),
    ("none", "DECODE and no verify", {"none"}),
]


def _frame(name, ts=0, dur=100):
    return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def _evidence(algorithm, evidence):
    """(events, attribute()'s keywords) showing the evidence as a capture of that algorithm would."""
    if evidence == "--algorithm":
        return [], {"algorithm": algorithm}
    if evidence == "server_args.json":
        return [], {"server_args": SERVER_ARGS[algorithm]}
    if evidence == "worker frame":
        return [_frame(WORKER_FRAMES[algorithm])], {}
    if evidence == "worker folder":
        return [_frame(f"{SRC}/dspark_components/proposer.py(30): propose")], {}
    if evidence.endswith(" span"):
        return [span(f"step[{evidence.split()[0]} bs=2]", 10, 5)], {}
    if evidence == "stage spans":
        return [span("draft", 0, 50), span("draft_extend", 60, 20)], {}
    if evidence == "DECODE beside TARGET_VERIFY":
        return [span("step[DECODE bs=2]", 10, 2), span("step[TARGET_VERIFY bs=2]", 20, 5)], {}
    if evidence.endswith("TARGET_VERIFY per iteration"):
        count = 2 if evidence.startswith("two") else 1
        return [span("scheduler.run_batch", 0, 100),
                *[span("step[TARGET_VERIFY bs=2]", 10 + 20 * k, 5) for k in range(count)]], {}
    if evidence == "DECODE and no verify":
        return [span("step[DECODE bs=2]", 10, 2)], {}
    raise AssertionError(evidence)


@pytest.mark.parametrize("algorithm, evidence, expected", ROWS)
def test_each_kind_of_evidence_leaves_these_candidates(tmp_path, algorithm, evidence, expected):
    events, keywords = _evidence(algorithm, evidence)
    path = write_trace(tmp_path / "t.trace.json", events or [span("other", 0, 1)])
    guess = attribute(build_index(read(str(path), RelabelOptions())), **keywords).algorithm
    assert set(guess.candidates) == set(expected)
    assert not guess.conflicts


# (algorithm, does the steps' order delimit its decode iterations, why its g_sk deltas are no accept
# lengths (None: they are), the same without the CPU lengths known kept where that matters)
FACTS = [
    ("eagle", True, None, None),
    ("eagle3", True, None, None),
    ("nextn", True, None, None),
    ("standalone", True, None, None),
    ("eagle-v1", True, "spec v1 (EAGLE before mid-2026) is possible", None),
    ("mtp", False, None, None),
    ("frozen-kv", False, None, None),
    ("dflash", False, None, "DFLASH without CPU lengths known kept"),
    ("dspark", False, "DSpark: its verify spans' g_sk is not an accept length", None),
    ("ngram", False, None, None),
    ("none", False, None, None),
]


@pytest.mark.parametrize("algorithm, ordered, blocked, blocked_without_cpu_lengths", FACTS)
def test_what_stats_and_the_speculation_figures_take_from_the_table(algorithm, ordered, blocked,
                                                                    blocked_without_cpu_lengths):
    assert (algorithm in ORDERED) == ordered
    kept = {"disable_overlap_schedule": True}
    found = algorithm_blocks(frozenset({algorithm}), kept)
    assert found is None if blocked is None else found.startswith(blocked)
    without = algorithm_blocks(frozenset({algorithm}), None)
    expected = blocked_without_cpu_lengths or blocked
    assert without is None if expected is None else without.startswith(expected)


def test_every_algorithm_has_its_rows_and_sglang_names():
    assert {row[0] for row in ROWS} == set(ALGORITHMS)
    assert {row[0] for row in ROWS if row[1] == "server_args.json"} == set(ALGORITHMS)
    assert {row[0] for row in FACTS} == set(ALGORITHMS)
    for name, family in ALGORITHMS.items():
        assert set(family.server_names) <= set(SGLANG_NAMES), name
        assert algorithm_name(name) == name
        for alias in family.aliases:
            assert algorithm_name(alias.upper().replace("-", "_")) == name

"""Real SGLang captures against the runner that ran every step (issue 30): small captures of SGLang
0.5.19 and 0.5.18 (old naming) and of 0.5.23 (newer naming) made by the sglang-cpu recipe, shipped in
fixtures/sglang-cpu/ with the recipe's truth.jsonl (fixtures/sglang-cpu/README.md). No python stacks,
no server_args.json beside them (SGLang writes none): the stage spans, modes, iteration order and the
naming itself decide, and spanfix must name every step span as the runner that ran it: 0 wrong, 0
ambiguous. A by-stage capture (profile_by_stage: one trace per stage, -EXTEND and -DECODE) is checked
file by file and both together (issue 43, 12)."""

import json
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, in_a_child
from real_traces_support import events

import spanfix
from spanfix.cli import main

# One worker runs them all: a capture's events and their truth, paired once, serve every test of it.
pytestmark = pytest.mark.xdist_group("sglang-truth")

CAPTURES = sorted(path for path in (FIXTURES / "sglang-cpu").iterdir() if path.is_dir())
BY_STAGE = [folder for folder in CAPTURES if folder.name.endswith("-by-stage")]


def _traces(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.trace.json.gz"))


def _trace(folder: Path) -> Path:
    [path] = _traces(folder)
    return path


def _events(path: Path) -> list[dict]:
    return events(path)  # decoded here, independently of spanfix (tests/real_traces_support.py)


def _word(mode: str, is_draft: bool) -> str:
    """The newer naming (step-spans.md section 2): a draft runner's step is DRAFT, the target's
    TARGET_VERIFY is VERIFY, any other mode stays."""
    return "DRAFT" if is_draft else "VERIFY" if mode == "TARGET_VERIFY" else mode


def _expected(name: str, is_draft: bool) -> str:
    """The name in the newer naming: the mode word as _word says, what follows it kept."""
    mode, rest = name[5:-1].split(" ", 1)
    return f"step[{_word(mode, is_draft)} {rest}]"


def _paired(files: list[list[dict]], truth: Path) -> list[list[tuple[int, dict]]]:
    """Each file's step spans (event index) with their truth lines. The k-th step span of a thread, in
    time order over every file (a by-stage capture's files are one process's, on one clock), is the
    k-th line of that (pid, tid); its mode word (old naming) or stage word (newer) and bs checked."""
    steps = defaultdict(list)
    for number, found_events in enumerate(files):
        for index, event in enumerate(found_events):
            if event.get("ph") == "X" and event.get("cat") == "user_annotation" and event["name"].startswith("step["):
                steps[event["pid"], event["tid"]].append((event["ts"], number, index))
    lines = defaultdict(list)
    for line in truth.read_text().splitlines():
        record = json.loads(line)
        lines[record["pid"], record["tid"]].append(record)
    paired: list[list[tuple[int, dict]]] = [[] for _ in files]
    for track, found in steps.items():
        found.sort()
        assert len(found) == len(lines[track]), track
        for (_, number, index), record in zip(found, lines[track]):
            name = files[number][index]["name"]
            assert name[5:].split(" ")[0] in (record["mode"], _word(record["mode"], record["is_draft"]))
            assert f" bs={record['bs']}" in name
            paired[number].append((index, record))
    return paired


_PAIRED: dict[Path, list[list[tuple[int, dict]]]] = {}  # a capture's steps paired with its truth, once a process


def _decoded_and_paired(folder: Path) -> list[list[tuple[int, dict]]]:
    return _paired([_events(source) for source in _traces(folder)], folder / "truth.jsonl")


def _paired_once(folder: Path) -> list[list[tuple[int, dict]]]:
    """_paired of the capture's files, shared by its tests (they only read it); its decoding done in a
    child (conftest.in_a_child: the decoded events would stay in this process's memory)."""
    if folder not in _PAIRED:
        _PAIRED[folder] = in_a_child(_decoded_and_paired, folder)
    return _PAIRED[folder]


def _relabelled_right(tmp_path: Path, source: Path, before: list[dict], paired: list[tuple[int, dict]]) -> None:
    """relabel names every step span of one trace as its runner would (0 wrong, 0 ambiguous), changing
    nothing else."""
    out = tmp_path / source.name.replace(".trace.json.gz", ".relabeled.trace.json")
    result = CliRunner().invoke(main, ["relabel", str(source), "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["files"][0]
    after = _events(out)
    wrong = [(before[index]["name"], after[index]["name"], record["is_draft"]) for index, record in paired
             if after[index]["name"] != _expected(before[index]["name"], record["is_draft"])]
    assert wrong == [] and summary["ambiguous"] == 0, (source.name, wrong[:5], summary["ambiguous_spans"][:3])
    assert len(after) == len(before)  # only names change: every other event as it was
    assert all(a == b for a, b in zip(before, after) if not a["name"].startswith("step["))


@pytest.mark.parametrize("folder", CAPTURES, ids=lambda p: p.name)
def test_every_step_is_named_as_the_runner_that_ran_it(tmp_path, folder):
    _PAIRED[folder] = in_a_child(_named_as_their_runners, tmp_path, folder)  # the events decoded in a child


def _named_as_their_runners(tmp_path: Path, folder: Path) -> list[list[tuple[int, dict]]]:
    sources = _traces(folder)
    befores = [_events(source) for source in sources]
    paired = _paired(befores, folder / "truth.jsonl")
    assert all(paired) and any(record["is_draft"] for found in paired for _, record in found) \
        == ("ngram" not in folder.name)
    for source, before, found in zip(sources, befores, paired):  # a by-stage capture's files apart
        _relabelled_right(tmp_path, source, before, found)
    return paired


def _stage_counts(paired: list[list[tuple[int, dict]]]) -> dict[str, int]:
    counted: dict[str, int] = defaultdict(int)
    for found in paired:
        for _, record in found:
            counted[_word(record["mode"], record["is_draft"])] += 1
    return dict(counted)


@pytest.mark.parametrize("folder", BY_STAGE, ids=lambda p: p.name)
def test_a_by_stage_capture_is_measured_alike_apart_and_together(folder):
    """Issue 43, 12: stats over the -EXTEND and -DECODE files, each alone and both at once, counts every
    stage as the runners ran them: no ambiguous row. The -EXTEND file's first prefill began before its
    profiler did (no scheduler.run_batch around it): the newer naming decides it (every draft step
    reads DRAFT), or, in the old naming, the mode and order of what is there."""
    sources = _traces(folder)
    assert [source.name.rsplit("-", 1)[1] for source in sources] == ["DECODE.trace.json.gz", "EXTEND.trace.json.gz"]
    paired = _paired_once(folder)
    for chosen in ([0], [1], [0, 1]):
        result = spanfix.stats([str(sources[k]) for k in chosen])
        counts = {row.keys[0]: row.summary.count for row in result.rows if row.clock == "cpu"}
        assert counts == _stage_counts([paired[k] for k in chosen]), [sources[k].name for k in chosen]
    assert "EXTEND" in _stage_counts([paired[1]]) and "DRAFT" in _stage_counts([paired[1]])


def _g_sk_accept(events: list[dict], window: int) -> float:
    """The trace's own accept length, worked out here from its VERIFY spans: consecutive verifies of one
    batch with no prefill between them, delta g_sk within bs..bs x window, summed over summed bs."""
    steps = sorted((e["ts"], e["name"]) for e in events
                   if e.get("cat") == "user_annotation" and e.get("name", "").startswith("step["))
    tokens = sizes = 0
    verifies = [(k, name) for k, (_, name) in enumerate(steps) if name.startswith("step[TARGET_VERIFY")]
    for (k, this), (n, following) in pairwise(verifies):
        fields = [dict(token.split("=") for token in name[:-1].split()[1:]) for name in (this, following)]
        between = [name for _, name in steps[k + 1:n] if "toks=" in name]
        bs = int(fields[0]["bs"])
        delta = int(fields[1]["g_sk"]) - int(fields[0]["g_sk"])
        if fields[1]["bs"] == fields[0]["bs"] and not between and bs <= delta <= bs * window:
            tokens, sizes = tokens + delta, sizes + bs
    return tokens / sizes


def _g_sk_accept_of(path: Path, window: int) -> float:
    return _g_sk_accept(_events(path), window)  # decoded in a child (conftest.in_a_child)


def test_detailed_annotations_give_the_accept_length_without_stacks_or_server_args():
    """0.5.19's verify spans carry g_sk: their deltas are the accept length (spec v1, which EAGLE's and
    STANDALONE's server names still allow, never wrote suffixes); the log's server_args= line names
    the run; the log's lines while the profiler ran, and the requests' responses, say about the same."""
    folder = FIXTURES / "sglang-cpu" / "0.5.19-standalone"
    trace_only = spanfix.stats(str(_trace(folder))).speculation
    assert trace_only.used.source == "trace annotations"
    assert trace_only.accept_length == pytest.approx(in_a_child(_g_sk_accept_of, _trace(folder), 4), rel=1e-12)
    result = spanfix.stats(str(_trace(folder)), spec_metrics=[str(folder / "server.log"),
                                                             str(folder / "generate_outputs.json")]).speculation
    assert result.config.title == "STANDALONE, 3 steps, topk 1, 4 draft tokens"
    figures = {figure.source: figure for figure in result.figures}
    assert figures["log"].detail.startswith("server log: the ") and "while the profiler ran" in figures["log"].detail
    assert figures["requests"].value == pytest.approx(figures["trace annotations"].value, rel=0.1)


def test_a_capture_before_detailed_annotations_says_so():
    folder = FIXTURES / "sglang-cpu" / "0.5.18-standalone"
    result = spanfix.stats(str(_trace(folder))).speculation
    assert result.accept_length is None
    assert any("SGLang before 0.5.19" in why for why in result.unknown)
    with_log = spanfix.stats(str(_trace(folder)), spec_metrics=[str(folder / "server.log")]).speculation
    assert with_log.used.source == "log" and with_log.config.server_algorithm == "STANDALONE"

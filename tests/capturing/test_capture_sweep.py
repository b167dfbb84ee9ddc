"""spanfix capture --load 1,2,4 --twin: a sweep of loads on a speculative server and its plain twin.

The servers here are tests/sglang_fake.py's, whose profiler writes a generated trace (tests/synth) at the
load's batch size as SGLang names it (`<profile_id>-TP-0.trace.json.gz`), and whose /generate answers
carry meta_info as SGLang's do, with an e2e_latency of the test's choosing: the unprofiled throughput of
each server is then known. The real servers' sweep is in tests/capturing/test_capture.py (SGLang-gated).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import time

import pytest
import synth
from conftest import ROOT
from sglang_fake import INTERNAL_ERROR, LOAD_ANSWER_SECONDS, Fake, run, server_info

import spanfix

LOADS = (1, 2, 4)
MAX_NEW = 8  # tokens each load request asks for


def _spec(load: int, plain: bool = False):
    spec = synth.SynthSpec(algorithm="ngram", detailed=True, decode_iterations=16, batch_size=load, seed=load)
    return synth.plain_twin(spec) if plain else spec


@functools.cache
def _trace_file(load: int, plain: bool, folder: str) -> str:
    """The generated trace of a load, written once per test process (gzip with mtime 0: the same bytes
    every time), for each profile to copy."""
    path = os.path.join(folder, f"{'plain' if plain else 'spec'}{load}-TP-0.trace.json.gz")
    synth.write(synth.generate(_spec(load, plain)), path, gzip=True)
    return path


@functools.cache
def _server_args(plain: bool) -> dict:
    return synth.generate(_spec(1, plain)).server_args


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("sweep-traces"))
    return lambda load, plain: _trace_file(load, plain, folder)


class Server:
    """A fake SGLang server: a generated trace at the load's batch size for each profile, and answers
    that took seconds_per_token each (per load: a dict) by the server's own clock."""

    def __init__(self, plain: bool, seconds_per_token, traces, fail_at: int | None = None, hang_at: int | None = None):
        self.plain, self.seconds_per_token, self.fail_at, self.hang_at = plain, seconds_per_token, fail_at, hang_at
        self.traces = traces
        self.running = False  # a profile that records and never ends by itself (hang_at)
        self.fake = Fake()
        self.url = self.fake.url
        self.profiles: list[dict] = []
        # The load of the next unprofiled round: the sweep's order is each load's warm-up, its unprofiled
        # round, then its profile, so once a load's profile starts the rounds that count are the next load's.
        self.load = LOADS[0]
        args = _server_args(plain)
        self.fake.answers[("GET", "/server_info")] = (200, "application/json",
                                                      json.dumps(server_info(**args)).encode())
        self.fake.answers[("POST", "/start_profile")] = self._start
        self.fake.answers[("POST", "/stop_profile")] = self._stop
        self.fake.answers[("POST", "/generate")] = self._generate

    def _load_of(self, body) -> int:
        return int(body["profile_id"].removeprefix("load")) if body["profile_id"].startswith("load") else 4

    def _start(self, body):
        load = self._load_of(body)
        self.profiles.append(body)
        self.load = next((n for n in LOADS if n > load), load)
        if self.fail_at == load:
            return INTERNAL_ERROR
        if self.hang_at == load:
            self.running = True
            return (200, "text/plain", b"Start profiling.\n")
        name = f"{body['profile_id']}-TP-0.trace.json.gz"
        temporary = os.path.join(body["output_dir"], f".{name}.part")
        shutil.copyfile(self.traces(load, self.plain), temporary)
        os.rename(temporary, os.path.join(body["output_dir"], name))
        return (200, "text/plain", b"Start profiling.\n")

    def _stop(self, body):
        """A profile that never ends by itself, stopped: it writes nothing here (capture removes what it
        would have); any other is over already (INTERNAL_ERROR: not in progress)."""
        if not self.running:
            return INTERNAL_ERROR
        self.running = False
        return (200, "text/plain", b"Stop profiling. This will take some time.\n")

    def _generate(self, body):
        time.sleep(LOAD_ANSWER_SECONDS)
        tokens = body["sampling_params"]["max_new_tokens"]
        per = self.seconds_per_token
        per = per[self.load] if isinstance(per, dict) else per
        meta = {"completion_tokens": tokens, "e2e_latency": tokens * per}
        if not self.plain:
            meta |= {"spec_verify_ct": max(1, tokens // 2), "spec_accept_length": 2.0}
        return (200, "application/json", json.dumps({"text": "x", "meta_info": meta}).encode())

    def close(self):
        self.fake.close()


@pytest.fixture
def servers(traces):
    made = []

    def make(plain, seconds_per_token, **kwargs):
        made.append(Server(plain, seconds_per_token, traces, **kwargs))
        return made[-1]

    yield make
    for server in made:
        server.close()


@pytest.fixture(scope="module")
def truth(traces) -> dict[int, dict]:
    """Each load's verdict of stats on the generated pair, as a sweep's should be (the same traces the
    servers write; once for the tests that compare with it)."""
    verdicts = {}
    for load in LOADS:
        result = spanfix.stats([traces(load, False)], baseline=[traces(load, True)])
        verdicts[load] = result.speculation.to_json()["verdict"]
    return verdicts


def _sweep(servers, tmp_path, plain_per_token, *extra):
    spec = servers(False, 0.01)
    plain = servers(True, plain_per_token)
    folder = tmp_path / "sweep"
    done = run("capture", spec.url, "--twin", plain.url, "--load", "1,2,4", "--max-new-tokens", MAX_NEW,
               "-o", folder, "--timeout", 60, *extra)
    return done, folder, spec, plain


def test_a_sweep_writes_each_load_by_name_and_its_unprofiled_ratio(servers, tmp_path, truth):
    # The plain twin's answers take the profiled speedup times the spec's: the ratios agree at every load.
    done, folder, spec, plain = _sweep(servers, tmp_path, {load: 0.01 * truth[load]["speedup"] for load in LOADS},
                                       "--format", "json")
    assert done.exit_code == 0, done.output
    for role in ("spec", "plain"):
        names = sorted(os.listdir(folder / role))
        assert names == sorted([*(f"load{n}-TP-0.trace.json.gz" for n in LOADS),
                                *(f"load{n}.requests.jsonl" for n in LOADS), "server_args.json", "server_info.json"])
        for load in LOADS:
            lines = (folder / role / f"load{load}.requests.jsonl").read_text().splitlines()
            assert lines and all(json.loads(line)["meta_info"]["completion_tokens"] == MAX_NEW for line in lines)
    assert sorted(os.listdir(folder)) == ["plain", "spec"]
    # Every load on one server, then every load on the other: the profiles named by their load, in order.
    assert [body["profile_id"] for body in spec.profiles] == ["load1", "load2", "load4"]
    assert [body["profile_id"] for body in plain.profiles] == ["load1", "load2", "load4"]
    document = json.loads(done.stdout)
    assert [one["load"] for one in document["loads"]] == list(LOADS)
    for one in document["loads"]:
        verdict = truth[one["load"]]
        assert one["profiled_speedup"] == pytest.approx(verdict["speedup"], abs=1e-4)
        assert one["profiled_speedup_interval"] == pytest.approx(verdict["speedup_interval"], abs=1e-4)
        # tokens over the longest answer: load x MAX_NEW tokens in MAX_NEW x 0.01 s
        assert one["unprofiled"]["spec"]["tokens_per_s"] == pytest.approx(one["load"] / 0.01, rel=1e-3)
        assert one["unprofiled_speedup"] == pytest.approx(verdict["speedup"], rel=1e-3)
        assert one["disagrees"] is False
    assert "disagree" not in done.stderr
    # What each load says it sends, counted as English counts (not "1 requests").
    for said in ("warming up: 1 request outside", "load: 1 request at once", "unprofiled round: 1 request at once",
                 "warming up: 2 requests outside", "load: 4 requests at once"):
        assert said in done.stderr, said
    assert "1 requests" not in done.stderr
    # docs/json.md's example has the keys as written.
    reference = (ROOT / "docs" / "json.md").read_text().split("### capture's `loads`")[1]
    (example,) = json.loads("{" + reference.split("```json")[1].split("```")[0] + "}")["loads"]
    written = document["loads"][0]
    assert list(example) == list(written) and list(example["unprofiled"]["spec"]) == list(written["unprofiled"]["spec"])
    # The verdict over every load is stats' on every trace against every twin's.
    assert document["speculation"]["verdict"]["batch_sizes"] == list(LOADS)
    assert "verdict: spanfix stats " in done.stderr


def test_the_sweep_warns_where_profiled_and_unprofiled_disagree(servers, tmp_path, truth):
    per_token = {load: 0.01 * truth[load]["speedup"] for load in LOADS}
    per_token[2] = 0.01 * 3 * truth[2]["speedup"]  # load 2 unprofiled: three times the profiled speedup
    done, _, _, _ = _sweep(servers, tmp_path, per_token)
    assert done.exit_code == 0, done.output
    warned = [line for line in done.stderr.splitlines() if "disagree by more than the interval" in line]
    assert len(warned) == 1 and warned[0].startswith("warning: at load 2 the profiled speedup"), done.stderr
    assert f"({3 * truth[2]['speedup']:.2f}x)" in warned[0]
    lines = {int(line.split()[1].rstrip(":")): line for line in done.stdout.splitlines()
             if line.startswith("  load ")}
    assert sorted(lines) == list(LOADS)
    assert f"profiled: {truth[1]['speedup']:.2f}x" in lines[1] and "unprofiled throughput: " in lines[1]
    assert lines[2].endswith("they disagree)") and not lines[1].endswith("they disagree)")


def test_compare_reads_the_sweeps_folders(servers, tmp_path):
    done, folder, _, _ = _sweep(servers, tmp_path, 0.012)
    assert done.exit_code == 0, done.output
    compared = run("compare", folder / "spec", folder / "plain", "--format", "json")
    assert compared.exit_code == 0, compared.output
    document = json.loads(compared.stdout)
    runs = {one["name"]: one for one in document["runs"]}
    assert set(runs) == {"spec", "plain"}
    assert sorted(row["bs"] for row in runs["spec"]["by_bs"]) == list(LOADS)
    assert all(row["speedup"] is not None for row in runs["spec"]["by_bs"])
    # The folders as --baseline FOLDER: stats reads the twin's folder as compare does.
    stats = run("stats", *sorted((folder / "spec").glob("*.trace.json.gz")), "--baseline", folder / "plain",
                "--format", "json")
    assert stats.exit_code == 0, stats.output
    assert json.loads(stats.stdout)["speculation"]["verdict"]["batch_sizes"] == list(LOADS)


@pytest.mark.parametrize("form", ["markdown", "csv"])
def test_the_loads_in_markdown_and_csv(servers, tmp_path, form):
    done, _, _, _ = _sweep(servers, tmp_path, 0.02, "--format", form)
    assert done.exit_code == 0, done.output
    if form == "markdown":  # a table under the verdict's
        rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and "x (95%" in line]
        assert [row.split(" | ")[0] for row in rows] == ["| 1", "| 2", "| 4"]
        assert all(row.endswith(("tokens/s) |", "disagree) |")) for row in rows)
    else:  # standard output keeps the rows alone; the loads are said on standard error
        assert "unprofiled" not in done.stdout
        assert [line.split(":")[0] for line in done.stderr.splitlines() if line.startswith("load ")] == \
            ["load 1", "load 2", "load 4"]


def test_a_plain_server_with_load_writes_its_traces_and_exits_0(servers, tmp_path):
    plain = servers(True, 0.01)
    folder = tmp_path / "plain"
    done = run("capture", plain.url, "--load", "4", "--max-new-tokens", MAX_NEW, "-o", folder, "--timeout", 60)
    assert done.exit_code == 0, done.output
    assert "no accept length" not in done.output
    names = sorted(os.listdir(folder))
    assert len(names) == 4 and {"server_args.json", "server_info.json", "requests.jsonl"} < set(names)
    assert [name for name in names if name.endswith("-TP-0.trace.json.gz")]
    # and as a sweep, on its own: each load's traces and requests, no twin, no unprofiled round
    swept = run("capture", plain.url, "--load", "1,2", "--max-new-tokens", MAX_NEW, "-o", tmp_path / "s",
                "--timeout", 60)
    assert swept.exit_code == 0, swept.output
    assert sorted(os.listdir(tmp_path / "s")) == ["load1-TP-0.trace.json.gz", "load1.requests.jsonl",
                                                  "load2-TP-0.trace.json.gz", "load2.requests.jsonl",
                                                  "server_args.json", "server_info.json"]
    assert "unprofiled" not in swept.output


@pytest.mark.parametrize("where", ["spec", "plain"])
def test_a_sweep_that_fails_midway_leaves_nothing(servers, tmp_path, where):
    spec = servers(False, 0.01, fail_at=2 if where == "spec" else None)
    plain = servers(True, 0.012, fail_at=4 if where == "plain" else None)
    folder = tmp_path / "sweep"
    done = run("capture", spec.url, "--twin", plain.url, "--load", "1,2,4", "--max-new-tokens", MAX_NEW,
               "-o", folder, "--timeout", 60)
    assert done.exit_code != 0
    assert not folder.exists(), os.listdir(folder)
    assert "removed what this capture wrote" in done.output
    assert "Traceback" not in done.output


def test_ctrl_c_midway_through_a_sweep_leaves_nothing(servers, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    spec = servers(False, 0.01)
    plain = servers(True, 0.012, hang_at=2)  # the twin's second load records until it is stopped
    folder = tmp_path / "sweep"
    process = subprocess.Popen([sys.executable, "-m", "spanfix", "capture", spec.url, "--twin", plain.url, "--load",
                                "1,2,4", "--max-new-tokens", str(MAX_NEW), "-o", str(folder), "--timeout", "60"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not plain.running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert plain.running, "the twin's second profile never started"
    assert (folder / "spec" / "load4-TP-0.trace.json.gz").exists() and (folder / "plain" / "load1-TP-0.trace.json.gz").exists()
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert not folder.exists() and out == ""
    assert "removed what this capture wrote" in err and not plain.running  # its profile was stopped


def test_loads_are_checked(servers, tmp_path):
    for value, said in (("1,0", "each load from 1"), ("2,2", "named twice"), ("1,x", "comma-separated"),
                        ("1,2000", "each load from 1 to 1024")):
        done = run("capture", "http://127.0.0.1:9", "--load", value, "-o", tmp_path / "c")
        assert done.exit_code == 2 and said in done.output, (value, done.output)
    with pytest.raises(spanfix.errors.UsageError, match="names a load twice"):
        spanfix.capture("http://127.0.0.1:9", tmp_path / "c", load=[1, 1])


# ---------------------------------------------------------------------------------------------------
# The real servers: SGLang 0.5.23 on CPU (../shared/sglang-cpu/0.5.23), NGRAM and its plain twin.

NGRAM = ["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "8"]  # make.sh's ngram run


@pytest.fixture(scope="module")
def ngram_servers(tmp_path_factory):
    """An NGRAM server and a plain one of the same target model, started at once, stopped by process."""
    from test_capture import RealServer

    logs = tmp_path_factory.mktemp("sglang-sweep")
    plain = RealServer("plain", [], logs / "plain.log")
    ngram = RealServer("ngram", NGRAM, logs / "ngram.log")
    try:
        plain.wait_ready()
        ngram.wait_ready()
        yield ngram, plain
    finally:
        plain.stop()
        ngram.stop()


def _needs_sglang():
    from test_capture import _missing

    return pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


@_needs_sglang()
@pytest.mark.xdist_group("sglang")  # the worker that runs test_capture's real servers: one set of servers at a time
def test_real_sweep_of_ngram_and_its_twin_over_loads_1_2_4(ngram_servers, tmp_path):
    import subprocess
    import sys

    ngram, plain = ngram_servers
    folder = tmp_path / "sweep"
    done = subprocess.run([sys.executable, "-m", "spanfix", "capture", ngram.url, "--twin", plain.url, "--load", "1,2,4",
                           "--max-new-tokens", "32", "--steps", "24", "-o", str(folder), "--format", "json"],
                          capture_output=True, text=True, check=False, timeout=1800)
    assert done.returncode == 0, done.stderr
    for role, algorithm in (("spec", "NGRAM"), ("plain", None)):
        names = set(os.listdir(folder / role))
        assert names == {*(f"load{n}-TP-0.trace.json.gz" for n in LOADS), *(f"load{n}.requests.jsonl" for n in LOADS),
                         "server_args.json", "server_info.json"}
        assert json.loads((folder / role / "server_args.json").read_text())["speculative_algorithm"] == algorithm
        for load in LOADS:
            answers = [json.loads(line) for line in (folder / role / f"load{load}.requests.jsonl").read_text().splitlines()]
            assert len(answers) >= load and all(a["meta_info"]["completion_tokens"] == 32 for a in answers)
    document = json.loads(done.stdout)
    verdict = document["speculation"]["verdict"]
    assert verdict is not None and verdict["clock"] == "cpu" and verdict["speedup"] > 0
    # Every load compared, each with its unprofiled throughput ratio from the answers' own e2e_latency.
    assert [one["load"] for one in document["loads"]] == list(LOADS)
    for one in document["loads"]:
        # A pair the verdict cannot compare (a busy machine: a speculative iteration faster than a plain one)
        # has no profiled speedup, and says why.
        assert (one["profiled_speedup"] or 0) > 0 or "not comparable" in (one["why"] or ""), one
        for side in ("spec", "plain"):
            rate = one["unprofiled"][side]
            assert rate["requests"] == one["load"] and rate["tokens"] == 32 * one["load"] and rate["tokens_per_s"] > 0
        spec, plain = one["unprofiled"]["spec"], one["unprofiled"]["plain"]  # tokens_per_s is to 0.1: the exact figures
        assert one["unprofiled_speedup"] == pytest.approx(
            (spec["tokens"] / spec["seconds"]) / (plain["tokens"] / plain["seconds"]), rel=1e-3)
        interval = one["profiled_speedup_interval"]
        if interval is not None:
            assert one["disagrees"] == (not interval[0] <= one["unprofiled_speedup"] <= interval[1])
            assert (f"at load {one['load']} the profiled speedup" in done.stderr) == one["disagrees"]
    # The batch sizes the verdict covers are the loads' (the profiled decode batches).
    assert set(document["speculation"]["verdict"]["batch_sizes"]) <= set(range(1, 5))
    compared = subprocess.run([sys.executable, "-m", "spanfix", "compare", str(folder / "spec"), str(folder / "plain"),
                               "--format", "json"], capture_output=True, text=True, check=False, timeout=600)
    assert compared.returncode == 0, compared.stderr
    runs = {one["name"]: one for one in json.loads(compared.stdout)["runs"]}
    assert set(runs) == {"spec", "plain"} and any(row["speedup"] for row in runs["spec"]["by_bs"])

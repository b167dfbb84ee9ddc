"""A folder as a run (issue 43, 4 and 3; issue 42, 3): one resolver (sources/layout.py) reads a run's
folder for compare's RUNs and --baseline, and for the --baseline FOLDER of stats, check, report and
capture. Two layouts: flat (the traces with server_args.json and the server's files beside them, as
capture writes one) and SGLang's own, RUN/traces/ with the server's files one level up (as the
sglang-cpu recipe leaves it), given as RUN or RUN/traces. Checked on generated captures (an EAGLE run
without detailed annotations, so that its accept length comes from the server's files, and its plain
twin), and on the real SGLang 0.5.23 captures in ../shared/traces/sglang-cpu when present."""

import json

import pytest
import synth
from click.testing import CliRunner
from conftest import SHARED_TRACES

import spanfix
from spanfix.cli import main

ACCEPT = 2.25  # the server_info.json's avg_spec_accept_length


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _spec(**fields):
    return synth.SynthSpec(**{"algorithm": "eagle", "num_steps": 3, "batch_size": 4, "cuda_graph": True,
                              "detailed": False, "decode_iterations": 6, "seed": 3, **fields})


def _capture(folder, trace, name, *, nested):
    """A run as SGLang's recipe leaves it (nested: RUN/traces/NAME, the server's files in RUN) or flat."""
    traces = folder / "traces" if nested else folder
    traces.mkdir(parents=True, exist_ok=True)
    synth.write(trace, traces / name)
    (folder / "server_args.json").write_text(json.dumps(trace.server_args))
    states = [{"avg_spec_accept_length": ACCEPT}] if trace.spec.algorithm != "none" else [{}]
    (folder / "server_info.json").write_text(json.dumps({**trace.server_args, "internal_states": states}))
    (folder / "server.log").write_text("[2026-08-20 10:11:12] The server is fired up and ready to roll!\n")
    return traces / name


@pytest.fixture(scope="module", params=["nested", "flat"])
def pair(request, tmp_path_factory):
    """An EAGLE run and its plain twin, each a folder in one layout: (root, traces, twin's traces)."""
    root = tmp_path_factory.mktemp(request.param)
    nested = request.param == "nested"
    spec = _capture(root / "eagle", synth.generate(_spec()), "eagle-TP-0.trace.json", nested=nested)
    plain = _capture(root / "plain", synth.generate(synth.plain_twin(_spec())), "plain-TP-0.trace.json",
                     nested=nested)
    return root, spec, plain, nested


def test_compare_reads_a_run_folder_files_and_all(pair):
    """Given RUN (or RUN/traces), compare reads its traces, server_args.json (the configuration, not
    ?/?/?) and the server's files (the accept length), and names the run RUN."""
    root, _, _, nested = pair
    given = [root / "eagle" / "traces", root / "plain" / "traces"] if nested else [root / "eagle", root / "plain"]
    for runs in ([root / "eagle", root / "plain"], given):
        comparison = spanfix.compare(runs)
        assert [r.name for r in comparison.runs] == ["eagle", "plain"] and comparison.baseline == "plain"
        eagle = comparison.run("eagle")
        assert eagle.config.server_algorithm == "EAGLE" and (eagle.config.steps, eagle.config.topk) == (3, 1)
        [row] = eagle.rows
        assert row.accept_length == pytest.approx(ACCEPT) and row.accept_source == "server_info"
        assert row.speedup is not None
    table = run("compare", *given)
    assert table.exit_code == 0, table.output
    assert "EAGLE 3/1/4" in table.stdout and "?/?/?" not in table.stdout


def test_a_run_folder_given_files_says_them_once(pair):
    root, _, _, _ = pair
    info = root / "eagle" / "server_info.json"
    given = spanfix.compare([root / "eagle", root / "plain"], spec_metrics={"eagle": [info]})
    assert [f.file for f in given.run("eagle").result.figures].count(str(info)) == 1


def test_a_folder_without_traces_says_what_it_found(tmp_path):
    """Not `compare needs a plain run` when no trace was found at all (issue 43, 4): what each folder
    holds, and that nothing could be compared."""
    for name in ("a", "b"):
        (tmp_path / name / "traces").mkdir(parents=True)
        (tmp_path / name / "server.log").write_text("log\n")
    result = run("compare", tmp_path / "a", tmp_path / "b")
    assert result.exit_code == 2 and result.stdout == ""
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("spanfix: error: no run to compare: ") and "needs a plain run" not in line
    assert f"{tmp_path / 'a'}: no trace in this folder" in line and "it holds server.log, traces/ (no file)" in line
    with pytest.raises(spanfix.TraceError, match="a: no trace in this folder"):  # errors="raise": the first
        spanfix.compare([tmp_path / "a", tmp_path / "b"])


def test_a_plain_run_that_could_not_be_read_is_named_beside_needs_a_plain_run(pair, tmp_path):
    root, _, _, _ = pair
    (tmp_path / "plain").mkdir()
    result = run("compare", root / "eagle", tmp_path / "plain")
    assert result.exit_code == 2
    assert "compare needs a plain run" in result.stderr and "not read: " in result.stderr
    assert f"{tmp_path / 'plain'}: no trace in this folder" in result.stderr


@pytest.mark.parametrize("command", ["stats", "check", "report"])
def test_baseline_folder_is_its_traces(pair, command, tmp_path):
    """Issue 42, 3: stats, check and report take --baseline FOLDER (RUN/traces/ too), as compare does:
    the same verdict as the folder's traces named one by one."""
    root, spec, plain, nested = pair
    out = ["-o", tmp_path / "r.html"] if command == "report" else ["--format", "json"]
    budget = ["--spec-metrics", root / "eagle" / "server_info.json"]
    budget += ["--budget", "speculation.speedup>=0.01"] if command == "check" else []
    folders = [root / "plain"] + ([root / "plain" / "traces"] if nested else [])
    expected = run(command, spec, "--baseline", plain, *budget, *out)
    assert expected.exit_code == 0, expected.output
    for folder in folders:
        given = run(command, spec, "--baseline", folder, *budget, *out)
        assert given.exit_code == 0, given.output
        if command == "stats":
            ours, theirs = json.loads(given.stdout)["speculation"], json.loads(expected.stdout)["speculation"]
            assert ours["verdict"] == theirs["verdict"] and ours["verdict"]["speedup"] > 0
        elif command == "check":
            assert json.loads(given.stdout)["rules"] == json.loads(expected.stdout)["rules"]
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = run(command, spec, "--baseline", empty, *out)
    assert refused.exit_code == 2 and "no trace in this folder" in refused.stderr and "it holds nothing" in refused.stderr


def test_the_api_takes_a_baseline_folder(pair):
    root, spec, plain, _ = pair
    metrics = [str(root / "eagle" / "server_info.json")]
    folder = spanfix.stats(str(spec), baseline=str(root / "plain"), spec_metrics=metrics).speculation
    files = spanfix.stats(str(spec), baseline=str(plain), spec_metrics=metrics).speculation
    assert folder.verdict.speedup == pytest.approx(files.verdict.speedup) and folder.verdict.speedup > 0


def test_capture_takes_a_baseline_folder(pair, tmp_path):
    """capture's --baseline FOLDER: parsed (a folder without traces refused before any server is asked),
    and the verdict of a capture against it is stats' against it."""
    from spanfix.capturing import Capture, CaptureResult, capture_verdict

    root, spec, plain, _ = pair
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = run("capture", "http://127.0.0.1:9", "--baseline", empty, "-o", tmp_path / "c")
    assert refused.exit_code == 2 and "no trace in this folder" in refused.stderr and not (tmp_path / "c").exists()
    asked = run("capture", "http://127.0.0.1:9", "--baseline", root / "plain", "-o", tmp_path / "c")
    assert asked.exit_code == 2 and "no server at http://127.0.0.1:9" in asked.stderr  # parsed, then the server
    done = CaptureResult(Capture("u", str(spec.parent), [str(spec)], "", str(root / "eagle" / "server_info.json"),
                                 None, "0.5.23", "EAGLE", {}, accept_lengths=[ACCEPT]))
    verdict = capture_verdict(done, baseline=str(root / "plain")).speculation.verdict
    expected = spanfix.stats(str(spec), baseline=str(plain),
                             spec_metrics=[str(root / "eagle" / "server_info.json")]).speculation.verdict
    assert verdict.speedup == pytest.approx(expected.speedup)
    assert done.command()[-4:-2] == ["--baseline", str(root / "plain")]


def test_server_args_one_level_up_from_a_traces_folder(pair):
    """A trace in RUN/traces/ is attributed with RUN/server_args.json (as one beside it would be)."""
    root, spec, _, nested = pair
    result = spanfix.stats(str(spec)).speculation
    assert result.config.server_algorithm == "EAGLE" and result.config.steps == 3
    if nested:  # one beside it wins
        beside = spec.parent / "server_args.json"
        beside.write_text(json.dumps({**json.loads((root / "eagle" / "server_args.json").read_text()),
                                      "speculative_num_steps": 5}))
        try:
            assert spanfix.stats(str(spec)).speculation.config.steps == 5
        finally:
            beside.unlink()


def test_run_and_baseline_swapped_is_said(pair):
    """Issue 43, 3: a plain capture with the speculative one as its baseline says the baseline is the
    speculative one (a warning, in every format), not only that the inputs do not speculate."""
    root, spec, plain, _ = pair
    for baseline in (spec, root / "eagle"):
        result = run("stats", plain, "--baseline", baseline, "--only", "speculation")
        assert result.exit_code == 0, result.output
        [warning] = [line for line in result.stderr.splitlines() if "swapped" in line]
        assert warning.startswith(f"warning: the baseline {spec} runs speculative decoding (eagle")
        assert "give the speculative capture as the input, and the plain one as --baseline" in warning
    document = json.loads(run("stats", plain, "--baseline", spec, "--format", "json").stdout)
    assert any("swapped" in warning for warning in document["warnings"])
    saved = run("stats", spec, "--format", "json").stdout  # a saved speculative result as the baseline
    path = root / "saved-eagle.json"
    path.write_text(saved)
    assert any("swapped" in w for w in spanfix.stats(str(plain), baseline=str(path)).warnings)
    right = run("stats", spec, "--baseline", plain)
    assert right.exit_code == 0 and "swapped" not in right.stderr
    plain_to_plain = spanfix.stats(str(plain), baseline=str(plain))
    assert not any("swapped" in w for w in plain_to_plain.warnings)


REAL = SHARED_TRACES / "sglang-cpu"


@pytest.mark.skipif(not (REAL / "standalone" / "traces").is_dir(), reason=f"real SGLang CPU captures ({REAL}) are absent")
def test_real_sglang_layout(tmp_path):
    """The real 0.5.23 captures, as the recipe left them: RUN/traces/ with server_args.json, server_info.json,
    server.log and generate_outputs.json in RUN. Given RUN or RUN/traces, compare reads the configuration and
    an accept length (the requests', as --spec-metrics generate_outputs.json would give it)."""
    # What the folder's traces given one by one with its three files give: the same for both spellings of the
    # folder, so worked out once (it reads the 135 MB capture).
    expected = spanfix.stats(sorted(map(str, (REAL / "standalone" / "traces").glob("*.gz"))),
                             spec_metrics=[str(REAL / "standalone" / name) for name in
                                           ("server_info.json", "server.log", "generate_outputs.json")])
    for runs in ([REAL / "standalone", REAL / "plain"], [REAL / "standalone" / "traces", REAL / "plain" / "traces"]):
        comparison = spanfix.compare(runs)
        standalone = comparison.run("standalone")
        assert standalone.title.startswith("STANDALONE, 3 steps, topk 1, 4 draft tokens")
        assert standalone.result.used.source == expected.speculation.used.source
        assert standalone.result.accept_length == pytest.approx(expected.speculation.accept_length)
    swapped = run("stats", *sorted((REAL / "plain" / "traces").glob("*.gz")), "--baseline", REAL / "standalone")
    assert swapped.exit_code == 0 and "runs speculative decoding (standalone)" in swapped.stderr

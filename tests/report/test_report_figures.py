"""report: the cases of test_figures.py (issue 21) that guard this room.

What the cases share, and why (the old file's docstring): tests/figures_support.py."""

from __future__ import annotations

from figures_support import _synth


def test_the_report_names_the_slowest_rank_on_the_device_clock(tmp_path):
    """Issue 21: figures a user can stand behind."""
    from spanfix.report import build_report
    paths = []
    for rank, scale in ((0, 1), (1, 2)):
        paths.append(_synth(tmp_path / f"p-TP-{rank}.trace.json", seed=rank, gpu_annotations=False,
                            target_kernels=40 * scale))
    slowest = build_report(paths).payload["ranks"]["slowest"]
    assert slowest["label"] == "TP1" and slowest["clock"] == "gpu" and "device clock" in slowest["by"]


def test_the_report_does_not_rank_decode_against_prefill(tmp_path):
    """Issue 21: figures a user can stand behind."""
    from spanfix.report import build_report
    (tmp_path / "a").mkdir()
    decode = _synth(tmp_path / "a" / "run.json", prefill_iterations=0, seed=1)
    prefill = _synth(tmp_path / "b.json", decode_iterations=0, prefill_iterations=3, seed=2)
    ranks = build_report([decode, prefill]).payload["ranks"]
    assert ranks["key"] == "file" and ranks["slowest"] is None
    assert ranks["unranked"].startswith("not ranked: the inputs ran different work (decode: run.json; prefill: b.json")


def test_the_report_names_an_unlike_baseline(tmp_path):
    """Issue 21: figures a user can stand behind."""
    from spanfix.report import build_report
    new = _synth(tmp_path / "new.json", batch_size=32, seed=1)
    old = _synth(tmp_path / "old.json", batch_size=16, seed=2)
    header = build_report([new], baseline=old).payload["header"]
    assert header["baseline_differences"] == ["batch sizes bs=32 here, bs=16 in the baseline"]


"""The real captures in ../shared/traces: none holds speculative spans, so relabel must leave each
byte-identical, and nothing may fail on them."""

import pytest
from conftest import needs_real_traces, real_traces

from spanfix.attribution.analyse import RelabelOptions
from spanfix.relabelling.write import relabel_file


@needs_real_traces
@pytest.mark.parametrize("path", real_traces(), ids=lambda p: p.name)
def test_relabel_leaves_real_traces_identical(tmp_path, path):
    out = tmp_path / path.name  # compressed as the input is, as its name says
    result = relabel_file(str(path), str(out), RelabelOptions())
    assert result.changed == 0
    assert out.read_bytes() == path.read_bytes()


@needs_real_traces
def test_real_sglang_extend_is_attributed_to_the_target_by_call_stack():
    from conftest import SHARED_TRACES

    from spanfix.attribution.attribute import attribute
    from spanfix.attribution.index import build_index
    from spanfix.read.reader import read_trace
    trace = read_trace(str(SHARED_TRACES / "sglang" / "qwen3-8b-prefilldecode.trace.json.gz"))
    index = build_index(trace)
    verdicts = attribute(index).verdicts
    assert [(s.name, v.role, v.evidence) for s, v in zip(index.steps, verdicts)] == [
        ("step[EXTEND bs=15 toks=15360]", "target", "call stack")]


@needs_real_traces
@pytest.mark.parametrize("path", real_traces(), ids=lambda p: p.name)
def test_real_traces_read_in_parts_as_whole(monkeypatch, path):
    """Large traces are read in chunks, on every core; forced here on small ones."""
    from conftest import read_in_parts, read_whole

    from spanfix.attribution.index import indexed_name
    from spanfix.read.reader import TraceError, located_names, read_trace

    def read():
        try:
            trace = read_trace(str(path), select=indexed_name)
        except TraceError as exc:
            return str(exc)
        return len(trace.events), list(trace.events.selected()), located_names(trace), trace.warnings, bytes(trace.data)

    read_whole(monkeypatch)
    whole = read()
    read_in_parts(monkeypatch, chunk_bytes=max(4096, path.stat().st_size // 5))
    assert read() == whole

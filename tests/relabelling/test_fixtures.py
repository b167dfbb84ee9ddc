"""The bundled fixtures: spanfix's output equals the checked-in golden output byte for byte."""

import gzip
import sys

import pytest
from conftest import FIXTURES

from spanfix.attribution.analyse import RelabelOptions
from spanfix.relabelling.write import relabel_file

sys.path.insert(0, str(FIXTURES))
from generate import fixtures, golden_path

NAMES = sorted(fixtures())


@pytest.mark.parametrize("name", NAMES)
def test_relabel_matches_golden(tmp_path, name):
    out = tmp_path / ("out.json.gz" if name.endswith(".gz") else "out.json")
    result = relabel_file(str(FIXTURES / name), str(out), RelabelOptions())
    assert not result.ambiguous and not result.conflicts
    data = out.read_bytes()
    if name.endswith(".gz"):
        assert data[:2] == b"\x1f\x8b"
        data = gzip.decompress(data)
    assert data == golden_path(FIXTURES, name).read_bytes()
    assert (result.changed > 0) == (name not in ("nonspec.trace.json", "already-new.trace.json",
                                                 "eagle-plain.trace.json.gz"))

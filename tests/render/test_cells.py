"""One set of cells per figure: the report's page shows the same text as the terminal and markdown
for every figure both show (render/cells.py), and only the page's detail columns beside them.

Before the cells were shared, the page wrote `1,234.5` where the terminal wrote `1234.5`, and always
had a `source` column on the device clock where the terminal names one source in the title."""

from pathlib import Path

import pytest
import synth

from spanfix.api import compare
from spanfix.render.cells import TOP_KERNELS, iteration_cells, iteration_unit, kernel_cells, stage_cells, stage_unit
from spanfix.render.compare import full_cells
from spanfix.render.speculation import speculation_cells
from spanfix.render.stats import markdown_table, stats_markdown
from spanfix.report import build_report
from spanfix.report.compare_page import compare_payload
from spanfix.report.kernel_tables import KERNEL_NAME_WIDTH

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "traces"
STAGE_DETAIL = {"busy_us", "baseline_mean_us"}
ITERATION_DETAIL = {"p99_us", "max_us", "baseline_mean_us"}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """An EAGLE trace long enough that a total runs past 1000 in its unit, and a baseline unlike it."""
    folder = tmp_path_factory.mktemp("cells")
    run, base = folder / "run.trace.json", folder / "base.trace.json"
    synth.write(synth.generate(synth.SynthSpec(algorithm="eagle", cuda_graph=False, decode_iterations=60, seed=3)), run)
    synth.write(synth.generate(synth.SynthSpec(algorithm="eagle", cuda_graph=False, decode_iterations=20, seed=4)), base)
    return build_report([run], baseline=str(base), command="spanfix report")


def _page_texts(table: dict, keys: list[str]) -> list[list[str]]:
    position = {column["key"]: k for k, column in enumerate(table["columns"])}
    return [[row[position[key]]["t"] for key in keys] for row in table["rows"]]


def _agree(page: dict, cells, detail: set[str], markdown: str) -> None:
    keys = [column.key for column in cells.columns]
    assert [column["key"] for column in page["columns"] if column["key"] not in detail] == keys
    assert _page_texts(page, keys) == cells.texts()
    if markdown:
        assert markdown_table(cells.header, cells.texts()) in markdown  # what markdown prints is these cells


def test_the_stage_tables_of_the_page_are_the_terminals(report):
    result, markdown = report.result, stats_markdown(report.result)
    unit = stage_unit(result)
    tables = {table["clock"]: table for table in report.payload["stages"]}
    assert set(tables) == {"cpu", "gpu"}
    texts = []
    for clock, table in tables.items():
        cells = stage_cells(result, clock, unit=unit)
        _agree(table, cells, STAGE_DETAIL, markdown)
        assert table["unit"] == unit
        texts += [text for row in cells.texts() for text in row]
    assert "change" in [column.key for column in cells.columns]  # the baseline's columns are compared too
    assert any(len(text.split(".")[0]) > 3 and text[0].isdigit() for text in texts)  # a figure past 1000
    assert not any("," in text for text in texts)
    # One device source: the title says it, and neither table has a column repeating it.
    assert "device_source" not in [column["key"] for column in tables["gpu"]["columns"]]
    assert tables["gpu"]["title"].endswith("(GPU annotations)")


def test_the_iteration_tables_of_the_page_are_the_terminals(report):
    result, markdown = report.result, stats_markdown(report.result)
    unit = iteration_unit(result)
    assert len(report.payload["iterations"]) == 2
    for table in report.payload["iterations"]:
        cells = iteration_cells(result, table["clock"], unit=unit)
        _agree(table, cells, ITERATION_DETAIL, markdown)
        assert table["rows"][0][0]["t"] == "iteration" and len(table["rows"]) > 1


def test_the_kernel_tables_of_the_page_are_the_terminals(report):
    result, markdown = report.result, stats_markdown(report.result)
    groups = report.payload["kernels"]["groups"]
    assert len(groups) == len(result.kernels) > 0
    for group, found in zip([g for g in result.kernels if g.part is None] + [g for g in result.kernels if g.part],
                            groups):
        assert markdown_table(*_laid_out(kernel_cells(group))) in markdown
        # The page's names are cut shorter for its width (whole on hover); every other cell is alike.
        cells = kernel_cells(group, TOP_KERNELS, KERNEL_NAME_WIDTH)
        _agree(found["table"], cells, set(), markdown="")
        texts = [text for row in cells.texts() for text in row]
        assert not any("," in text for text in texts)


def _laid_out(cells):
    return cells.header, cells.texts()


def test_the_speculation_table_of_the_page_is_the_terminals(report):
    header, rows = speculation_cells(report.result.speculation)
    [table] = [t for t in report.payload["speculation"]["tables"] if t["id"] == "speculation-figures"]
    assert [column["label"] for column in table["columns"]] == header
    # A sub-row's indent is an em space on the page (HTML collapses the terminal's spaces); the rest is alike.
    assert [[cell["t"].replace("\u2003", "  ") for cell in row] for row in table["rows"]] == rows


@pytest.fixture(scope="module")
def compared():
    """Real SGLang captures (../shared/traces): the STANDALONE run and an older one, against the plain run."""
    runs = [SHARED / "sglang-cpu" / "standalone", ROOT / "fixtures" / "sglang-cpu" / "0.5.18-standalone"]
    if not all(path.exists() for path in runs):
        pytest.skip("../shared/traces is absent")
    return compare(runs, baseline=SHARED / "sglang-cpu" / "plain")


def test_the_compare_rows_agree(compared):
    header, rows = full_cells(compared, merged=True)
    page = compare_payload(compared)["table"]
    assert [column["key"] for column in page["columns"]] == header
    # Every cell alike but the last, where the page writes the why on a line of its own.
    assert [[cell["t"] for cell in row[:-1]] for row in page["rows"]] == [row[:-1] for row in rows]

"""The progress bar: only on a terminal, only for long work, never with machine output."""

import io

import pytest

from spanfix.cli import progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("tty, machine, files, shown", [
    (True, False, 2, True),  # several files on a terminal
    (True, True, 2, False),  # --json
    (False, False, 2, False),  # piped
    (True, False, 1, False),  # one small file: over before a bar is worth drawing
])
def test_progress_only_where_wanted(tmp_path, monkeypatch, tty, machine, files, shown):
    sources = []
    for number in range(files):
        path = tmp_path / f"{number}.json"
        path.write_bytes(b"[]")
        sources.append(str(path))
    stream = Terminal() if tty else io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", stream)
    with progress.file_progress(sources, machine_output=machine) as bar:
        for source in sources:
            bar.done(source)
    assert (bar._progress is not None) is shown

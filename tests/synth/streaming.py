"""Large traces written as they are generated, in constant memory."""

from __future__ import annotations

from pathlib import Path

from .builder import _Builder
from .scripts import _run
from .spec import SynthSpec, _check
from .traces import _metadata
from .writing import _event_text, _foot, _head, _open_for_writing


def stream_large(spec: SynthSpec, path: str | Path, target_bytes: int, gzip: bool | None = None) -> int:
    """Writes an object-form trace of about target_bytes (uncompressed) by repeating decode iterations.

    Memory stays constant: each iteration's events are written and dropped. Returns the number of
    uncompressed bytes written. No truths are kept; use `generate` for those.
    """
    _check(spec)
    b = _Builder(spec, 0, keep_truths=False)
    metadata, leading = _metadata(spec, 0, 1)
    written = 0
    separator = ""
    with _open_for_writing(path, gzip) as out:
        def emit(text: str) -> None:
            nonlocal written
            data = text.encode()
            out.write(data)
            written += len(data)

        emit(_head(metadata, leading))
        # Leaves room for the closing events so that the total lands near the target.
        reserve = 4096
        for _ in _run(b, spec, endless=True):
            emit(separator + ",\n".join([_event_text(event) for event in b.drain()]))
            separator = ",\n"
            if written + reserve >= target_bytes:
                break
        closing = b.close_roots() + b.tail()
        emit(separator + ",\n".join([_event_text(event) for event in closing]) + _foot(metadata, leading))
    return written

"""Writing Kineto-like text, and the truths sidecar."""

from __future__ import annotations

import gzip as _gzip
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import IO

from .spec import FORMS, Micros, SynthTrace


@lru_cache(maxsize=16384)  # names and keys repeat endlessly; bounded because detailed suffixes keep growing
def _jstr(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _value(value) -> str:
    kind = type(value)
    if kind is str:
        return _jstr(value)
    if kind is int:
        return str(value)
    if kind is Micros:
        return value.text
    if kind is dict:
        return "{" + ", ".join([f"{_jstr(k)}: {_value(v)}" for k, v in value.items()]) + "}"
    if kind is list:
        return "[" + ", ".join([_value(v) for v in value]) + "]"
    return json.dumps(value, ensure_ascii=False)


def _event_text(event: dict) -> str:
    return "{" + ", ".join([f"{_jstr(k)}: {_value(v)}" for k, v in event.items()]) + "}"


def _head(metadata: dict, leading: int) -> str:
    parts = [f"{_jstr(k)}: {json.dumps(v)}" for k, v in list(metadata.items())[:leading]]
    return "{" + "".join(part + ", " for part in parts) + '"traceEvents": [\n'


def _foot(metadata: dict, leading: int) -> str:
    parts = [f"{_jstr(k)}: {json.dumps(v)}" for k, v in list(metadata.items())[leading:]]
    return "\n]" + "".join(", " + part for part in parts) + "}\n"


def dumps(trace: SynthTrace, form: str = "object") -> bytes:
    """The trace as Kineto writes it: one event per line, times with exactly three decimals.

    form: "object" ({"traceEvents": [...]} with metadata around it), "array" (a bare array), or
    "array-unterminated" (a bare array whose last event is followed by ",\\n" and no closing bracket).
    """
    body = ",\n".join([_event_text(event) for event in trace.events])
    if form == "object":
        text = _head(trace.metadata, trace.leading_keys) + body + _foot(trace.metadata, trace.leading_keys)
    elif form == "array":
        text = "[\n" + body + "\n]\n"
    elif form == "array-unterminated":
        text = "[\n" + body + ",\n"
    else:
        raise ValueError(f"unknown form {form!r}; expected one of {', '.join(FORMS)}")
    return text.encode()


@contextmanager
def _open_for_writing(path: str | Path, gzip: bool | None) -> Iterator[IO[bytes]]:
    path = Path(path)
    compress = path.name.endswith(".gz") if gzip is None else gzip
    with open(path, "wb") as raw:
        if compress:
            # mtime=0 and no file name in the header: the same trace always gives the same bytes.
            with _gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=6, mtime=0) as out:
                yield out
        else:
            yield raw


def write(trace: SynthTrace, path: str | Path, form: str = "object", gzip: bool | None = None) -> None:
    """Writes dumps(trace, form); gzip-compressed when gzip is True, or by default when path ends in .gz."""
    data = dumps(trace, form)
    with _open_for_writing(path, gzip) as out:
        out.write(data)


def truths_json(trace: SynthTrace) -> dict:
    """The sidecar that describes a written trace: its spec, server args and every step span's truth."""
    return {"spec": asdict(trace.spec), "server_args": trace.server_args,
            "truths": [asdict(truth) for truth in trace.truths]}

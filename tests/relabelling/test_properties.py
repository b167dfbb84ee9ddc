"""Properties of relabel over generated traces (hypothesis).

The traces are small but varied in everything spanfix must not care about: step names from the
grammar of shared/docs/step-spans.md section 1 (old, new and odd spellings), key order, whitespace and
separators, escaped names, B/E pairs next to X spans, GPU copies, a draft-named thread or none,
the three container forms, gzip or not. The checks read the output with Python's own json module
and the generator's own record of where each name sits, not with spanfix's reader.
"""

import gzip
import json
import os
import re
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanfix.attribution.algorithms import ALGORITHMS
from spanfix.attribution.analyse import RelabelOptions
from spanfix.attribution.naming import parse_step_name, relabel_step_name
from spanfix.relabelling.write import relabel_file

# Modest, so `make test` stays fast; SPANFIX_EXAMPLES=2000 digs deeper.
SETTINGS = settings(max_examples=int(os.environ.get("SPANFIX_EXAMPLES", "60")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

TARGET_TRACK, DRAFT_TRACK, GPU_TRACK = (1, 1), (1, 2), (0, 7)
SUFFIX_KEYS = {"g": ["g_sq", "g_sqsq", "g_sqsk", "g_sk"], "c": ["c_sq", "c_sqsq", "c_sqsk", "c_sk"]}

counts = st.integers(0, 64)


@st.composite
def step_names(draw) -> str:
    mode = draw(st.sampled_from([
        "EXTEND", "DECODE", "MIXED", "IDLE", "TARGET_VERIFY", "DRAFT_EXTEND_V2", "DRAFT_EXTEND", "SPLIT_PREFILL",
        "DLLM_EXTEND", "PREBUILT", "DRAFT_LOOP", "DRAFT", "VERIFY", "decode", "prefill", "extend"]))
    if mode == "DRAFT_LOOP":
        return f"step[DRAFT_LOOP raw_bs={draw(counts)} bs={draw(counts)} topk={draw(counts)}]"
    words = [mode]
    if draw(st.booleans()) and mode == "DECODE":
        words.append("smc-head-eager")  # an extra token seen in the wild
    words.append(f"bs={draw(counts)}")
    if mode.upper() in ("EXTEND", "PREFILL") or (mode == "DECODE" and len(words) == 3):
        words.append(f"toks={draw(counts)}")
    if draw(st.booleans()):  # detailed_annotations: either family of keys, forks mix them up
        words += [f"{key}={draw(counts)}" for key in SUFFIX_KEYS[draw(st.sampled_from("gc"))]]
    return "step[" + " ".join(words) + "]"


@st.composite
def traces(draw) -> dict:
    """Events (as dicts, in file order) plus how to lay them out as text."""
    units = []  # events that must stay together, in order: a span and its GPU copy, a B and its E
    external_ids = iter(range(1000, 2000))
    for _ in range(draw(st.integers(0, 10))):
        name = draw(step_names())
        track = draw(st.sampled_from([TARGET_TRACK, DRAFT_TRACK]))
        ts, dur = draw(st.integers(0, 200)), draw(st.integers(0, 30))
        kind = draw(st.sampled_from(["X", "X", "BE", "BE-named-end"]))
        if kind == "X":
            event = {"ph": "X", "cat": "user_annotation", "name": name, "pid": track[0], "tid": track[1],
                     "ts": ts, "dur": dur}
            unit = [event]
            if draw(st.booleans()):
                external_id = next(external_ids)
                event["args"] = {"External id": external_id}
                if draw(st.booleans()):  # Kineto's copy of the range on the GPU stream
                    unit.append({"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": GPU_TRACK[0],
                                 "tid": GPU_TRACK[1], "ts": ts + 1, "dur": dur, "args": {"External id": external_id}})
            units.append(unit)
        else:
            end = {"ph": "E", "pid": track[0], "tid": track[1], "ts": ts + dur}
            if kind == "BE-named-end":
                end["name"] = name
            units.append([{"ph": "B", "name": name, "pid": track[0], "tid": track[1], "ts": ts}, end])
    for _ in range(draw(st.integers(0, 3))):
        units.append([{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                       "ts": draw(st.integers(0, 200)), "dur": 1, "args": {"Input dims": [[2, 2]]}}])
    # Kineto does not sort events. (A B and its E stay adjacent: an E that closes another B than
    # its own is tested in attribution/test_attribution_robustness.py.)
    events = [event for unit in draw(st.permutations(units)) for event in unit]
    draft_named = draw(st.booleans())
    if draft_named:
        events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "draft worker"}})
    events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "thread 1 (sglang::schedul)"}})
    layout = {
        "form": draw(st.sampled_from(["object", "array", "array-unterminated"])),
        "trailing_comma": draw(st.booleans()),
        "item": draw(st.sampled_from([", ", ",", ",\n    ", " ,"])),
        "colon": draw(st.sampled_from([": ", ":", " : "])),
        "between": draw(st.sampled_from([",\n", ",", ", ", "\n,\n"])),
        "key_orders": [draw(st.permutations(list(e))) for e in events],
        "escape_names": [draw(st.sampled_from(["plain", "plain", "escaped-start", "escaped-bracket"])) for _ in events],
        "gzip": draw(st.booleans()),
    }
    return {"events": events, "layout": layout, "draft_named": draft_named}


def _name_text(name: str, how: str) -> str:
    text = json.dumps(name)[1:-1]
    if how == "escaped-start":  # "\u0073tep[": the same string to a JSON reader
        return f"\\u{ord(name[0]):04x}" + text[1:] if name else text
    if how == "escaped-bracket" and text.startswith("step["):
        return "step\\u005b" + text[5:]
    return text


def render(trace: dict) -> tuple[bytes, list[tuple[int, int]]]:
    """The trace as bytes, and where each event's name content sits (event order; quotes excluded)."""
    layout = trace["layout"]
    parts: list[str] = []
    names: list[tuple[int, int]] = []
    size = 0

    def put(text: str) -> None:
        nonlocal size
        parts.append(text)
        size += len(text.encode())

    form = layout["form"]
    put('{"schemaVersion": 1, "traceEvents": [\n' if form == "object" else "[\n")
    for number, event in enumerate(trace["events"]):
        if number:
            put(layout["between"])
        put("{")
        for position, key in enumerate(layout["key_orders"][number]):
            put((layout["item"] if position else "") + json.dumps(key) + layout["colon"])
            if key == "name":
                put('"')
                start = size
                put(_name_text(event["name"], layout["escape_names"][number]))
                names.append((start, size))
                put('"')
            else:
                put(json.dumps(event[key]))
        put("}")
    if form == "object":
        put('\n], "displayTimeUnit": "ns"}\n')
    elif form == "array":
        put("\n]\n")
    else:
        put(",\n" if layout["trailing_comma"] else "\n")
    return "".join(parts).encode(), names


def relabel_bytes(data: bytes, gz: bool, folder: Path, name: str, algorithm: str | None = None) -> tuple[bytes, object]:
    source = folder / (name + (".json.gz" if gz else ".json"))
    source.write_bytes(gzip.compress(data, mtime=0) if gz else data)
    result = relabel_file(str(source), None, RelabelOptions(algorithm=algorithm))
    output = Path(result.output).read_bytes()
    assert (output[:2] == b"\x1f\x8b") is gz
    return (gzip.decompress(output) if gz else output), result


def load_events(data: bytes, form: str) -> list[dict]:
    if form == "object":
        return json.loads(data)["traceEvents"]
    text = data.decode().rstrip()
    if form == "array-unterminated":
        text = text.rstrip(",") + "]"
    return json.loads(text)


def renamed(trace: dict) -> tuple[bytes, list[tuple[int, int]], bytes, object]:
    data, names = render(trace)
    with tempfile.TemporaryDirectory() as folder:
        output, result = relabel_bytes(data, trace["layout"]["gzip"], Path(folder), "t")
    return data, names, output, result


@SETTINGS
@given(traces(), st.sampled_from(sorted(ALGORITHMS)))
def test_relabel_is_idempotent(trace, algorithm):
    # With the algorithm stated. Left to be guessed, the guess can rest on modes that the first
    # pass renames away: see attribution/test_attribution_robustness.py::test_relabel_of_a_relabelled_trace_keeps_the_algorithm_guess.
    data, _ = render(trace)
    with tempfile.TemporaryDirectory() as folder:
        once, _ = relabel_bytes(data, trace["layout"]["gzip"], Path(folder), "once", algorithm)
        twice, result = relabel_bytes(once, trace["layout"]["gzip"], Path(folder), "twice", algorithm)
    assert twice == once
    assert result.changed == 0


_STRING_REST = re.compile(rb'(?:[^"\\]|\\.)*(?=")', re.DOTALL)
_PLAIN_MODE = re.compile(rb"step\[[^\s\]\\]+")


@SETTINGS
@given(traces())
def test_output_differs_from_input_only_inside_renamed_names(trace):
    data, names, output, _ = renamed(trace)
    # Walk both files together: between names the bytes must be identical, and each name is its
    # old self or SGLang's newer name for it.
    out_position = previous_end = 0
    for start, end in names:
        gap = data[previous_end:start]
        assert output[out_position:out_position + len(gap)] == gap
        out_position += len(gap)
        new_end = _STRING_REST.match(output, out_position).end()
        old_bytes, new_bytes = data[start:end], output[out_position:new_end]
        old, new = json.loads(b'"' + old_bytes + b'"'), json.loads(b'"' + new_bytes + b'"')
        assert new in (old, relabel_step_name(old, is_draft=True), relabel_step_name(old, is_draft=False))
        plain = _PLAIN_MODE.match(old_bytes)
        if new == old:
            assert new_bytes == old_bytes
        elif plain:  # only the MODE word changed; whatever follows kept its bytes
            assert new_bytes == b"step[" + parse_step_name(new).mode.encode() + old_bytes[plain.end():]
        out_position, previous_end = new_end, end
    assert output[out_position:] == data[previous_end:]


@SETTINGS
@given(traces())
def test_events_keep_their_number_order_and_everything_but_names(trace):
    data, _, output, result = renamed(trace)
    form = trace["layout"]["form"]
    before, after = load_events(data, form), load_events(output, form)
    assert len(after) == len(before)
    cpu_names = {}
    for old, new in zip(before, after):
        assert {k: v for k, v in new.items() if k != "name"} == {k: v for k, v in old.items() if k != "name"}
        if "name" not in old:
            continue
        assert new["name"] in (old["name"], relabel_step_name(old["name"], is_draft=True),
                               relabel_step_name(old["name"], is_draft=False))
        track = (old.get("pid"), old.get("tid"))
        external_id = old.get("args", {}).get("External id")
        if track == GPU_TRACK:  # a GPU copy is renamed exactly like its CPU span
            assert (old["name"], new["name"]) == cpu_names.get(external_id, (old["name"], old["name"]))
            continue
        if external_id is not None:
            cpu_names[external_id] = (old["name"], new["name"])
        if trace["draft_named"] and new["name"] != old["name"]:
            # A draft-named thread is evidence that no other kind may contradict.
            assert (parse_step_name(new["name"]).mode == "DRAFT") == (track == DRAFT_TRACK)
    renamed_spans = [old for old, new in zip(before, after)
                     if old.get("name") != new.get("name") and old["ph"] in ("X", "B") and old.get("pid") != GPU_TRACK[0]]
    assert result.changed == len(renamed_spans)


@given(st.lists(st.one_of(st.sampled_from(["bs", "toks", "xbs", "bs=", "toks=", "=", "bs==1"]),
                          st.text(alphabet="bst=ok0123456789-x", max_size=8)), max_size=6),
       st.lists(st.sampled_from([" ", "\t", "  "]), min_size=6, max_size=6),
       st.lists(st.integers(-3, 300), min_size=6, max_size=6))
def test_bs_and_toks_read_as_the_fields_say(tokens, spaces, numbers):
    from spanfix.attribution.naming import _int_or_none
    rest = "".join(f"{space}{token}{number if token.endswith('=') else ''}"
                   for token, space, number in zip(tokens, spaces, numbers))
    step = parse_step_name(f"step[DECODE{rest}]")
    fields = step.fields
    assert (step.bs, step.toks) == (_int_or_none(fields.get("bs")), _int_or_none(fields.get("toks")))

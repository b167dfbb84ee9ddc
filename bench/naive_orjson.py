"""The same five-minute script with orjson: load, rename, dump."""

import gzip
import sys

import orjson


def main(source: str, target: str) -> None:
    opener = gzip.open if source.endswith(".gz") else open
    with opener(source, "rb") as stream:
        trace = orjson.loads(stream.read())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    for event in events:
        name = event.get("name")
        if isinstance(name, str) and name.startswith("step[TARGET_VERIFY"):
            event["name"] = "step[VERIFY" + name[len("step[TARGET_VERIFY"):]
    data = orjson.dumps(trace)
    with (gzip.open(target, "wb", compresslevel=1) if target.endswith(".gz") else open(target, "wb")) as stream:
        stream.write(data)


if __name__ == "__main__":
    main(*sys.argv[1:3])

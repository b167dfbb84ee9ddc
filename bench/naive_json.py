"""The script a user would write in five minutes: load, rename, dump (standard json module)."""

import gzip
import json
import sys


def main(source: str, target: str) -> None:
    opener = gzip.open if source.endswith(".gz") else open
    with opener(source, "rb") as stream:
        trace = json.load(stream)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    for event in events:
        name = event.get("name")
        if isinstance(name, str) and name.startswith("step[TARGET_VERIFY"):
            event["name"] = "step[VERIFY" + name[len("step[TARGET_VERIFY"):]
    with (gzip.open(target, "wt", compresslevel=1) if target.endswith(".gz") else open(target, "w")) as stream:
        json.dump(trace, stream)


if __name__ == "__main__":
    main(*sys.argv[1:3])

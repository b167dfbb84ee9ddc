"""The floor: read the bytes, find every step span name with one regular expression, write the
bytes back. No tool that reads the whole file and writes it again can be much faster."""

import re
import sys

STEP_NAME = re.compile(rb'"name"\s*:\s*"step\[[^"]*"')


def main(source: str, target: str) -> None:
    with open(source, "rb") as stream:
        data = stream.read()
    found = len(STEP_NAME.findall(data))
    with open(target, "wb") as stream:
        stream.write(data)
    print(found, file=sys.stderr)


if __name__ == "__main__":
    main(*sys.argv[1:3])

"""How much memory spanfix may use, and so how large a trace it accepts: the machine's memory, its
cgroup's limit and the process's ulimits, whichever is smallest."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def memory_budget() -> int | None:
    """The memory spanfix may use, in bytes: the smallest of the machine's physical memory, the
    memory limit of its cgroup (a container's), and the process's address-space and data limits
    (ulimit -v, -d). None where none of them can be found."""
    limits = []
    with contextlib.suppress(ValueError, OSError, AttributeError):
        limits.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    limits += _cgroup_limits()
    try:
        import resource

        for which in (resource.RLIMIT_AS, resource.RLIMIT_DATA):
            soft = resource.getrlimit(which)[0]
            if soft != resource.RLIM_INFINITY and soft > 0:
                limits.append(soft)
    except (ImportError, OSError, ValueError):  # pragma: no cover - not a Unix
        pass
    limits = [limit for limit in limits if limit > 0]
    return min(limits) if limits else None


def _cgroup_limits() -> list[int]:
    """memory.max of the process's cgroup and its ancestors (cgroup v2), or memory.limit_in_bytes (v1)."""
    found = []
    try:
        with open("/proc/self/cgroup", encoding="utf-8", errors="replace") as lines:
            entries = [line.rstrip("\n").split(":", 2) for line in lines]
    except OSError:
        return found
    for entry in entries:
        if len(entry) != 3:
            continue
        _, controllers, path = entry
        if controllers == "":
            base, name = Path("/sys/fs/cgroup"), "memory.max"
        elif "memory" in controllers.split(","):
            base, name = Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"
        else:
            continue
        folder = base / path.lstrip("/")
        for candidate in (folder, *folder.parents):
            if not str(candidate).startswith(str(base)):
                break
            with contextlib.suppress(OSError, ValueError):
                text = (candidate / name).read_text().strip()
                if text and text != "max":
                    found.append(int(text))
    return [limit for limit in found if limit < 2**60]  # v1 writes "no limit" as a huge number


_FALLBACK_MAX_BYTES = 64 * 2**30


def default_max_bytes() -> int:
    """Half the memory spanfix may use: reading holds the document and, beside it, the events it
    decodes (0.9 to 1.7 times the document on the benchmark trace). Larger inputs, and gzip files
    that would inflate beyond it, are refused before they are read or inflated."""
    budget = memory_budget()
    return budget // 2 if budget else _FALLBACK_MAX_BYTES


def max_bytes_phrase(max_bytes: int, explicit: bool) -> str:
    shown = f"{max_bytes} bytes" if explicit else f"{max_bytes / 2**30:.1f} GiB"
    return f"--max-bytes ({shown})" if explicit else (
        f"--max-bytes ({shown}, by default half the memory spanfix may use; pass --max-bytes to raise it)")

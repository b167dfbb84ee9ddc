"""SGLang's profiler, driven over HTTP: what to ask of it (the ProfileReq body), starting and stopping
it, and the trace files it writes, found where they are written and brought into the capture's
folder, each only once it is whole.

What SGLang does (managers/scheduler_components/profiler_manager.py, SchedulerProfilerManager._profile):

- A start without `start_step` (nor `profile_by_stage`) starts at once, and a profile already in
  progress does not refuse it: `_init_profile`'s "Profiling is already in progress" is dropped, and
  `_start_profile` starts torch's profiler again, which cancels the trace of the one running (which
  then writes into ITS folder, under ITS profile id). So capture sends `start_step` (1: the next
  forward step), whose start answers `_init_profile`'s result: 500 when a profile is in progress.
- With `start_step`, the profile is armed, not running, until the next forward step
  (`_profile_batch_predicate`); records exactly `num_steps` forward steps, then stops by itself at the
  next batch and exports `<profile_id>-TP-<r>[-DP-<d>][-PP-<p>][-EP-<e>].trace.json.gz` into `output_dir`
  (`_stop_profile`; torch writes the gzip file progressively, so a file is whole only when its gzip
  stream ends). A server without traffic takes no step: nothing starts, nothing is written.
- `/stop_profile` stops a running profile and answers once every rank has written its file; an
  armed one it refuses (500, "not in progress") and leaves armed: it would start at the next request.
  A start without start_step followed by a stop disarms it (`_stop_profile` clears the armed step).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import stat
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from ..errors import SpanfixError, TraceError
from ..sources import is_url, join, local_path
from .folder import CaptureFolder, LinkRefused, linked
from .server import Server, ServerError, ServerInfo

# The first release whose ProfileReq has detailed_annotations (the iteration-level c_/g_ aggregates in
# each step span's name, which give the accept length from the trace itself): SGLang 0.5.19. Older
# releases ignore the field without a word, so the version decides.
DETAILED_SINCE = (0, 5, 19)
# The first release that names draft and verify steps itself (step[DRAFT ...], step[VERIFY ...]): from it
# on, a capture needs no python stacks to tell the two apart, and leaves them out by default (with_stack
# slows host work unevenly: the host clock of a capture with stacks is not the server's).
NEW_NAMES_SINCE = (0, 5, 20)
# start_step came in mid-2025 (sglang pull request 7608), before 0.5.0; older servers start at once.
START_STEP_SINCE = (0, 5, 0)
STOP_TIMEOUT = 600.0  # seconds /stop_profile may take: every rank exports its trace before it answers


@dataclass(frozen=True)
class ProfileRequest:
    """The /start_profile body capture sends (io_struct.py, ProfileReq)."""

    output_dir: str
    num_steps: int
    activities: tuple[str, ...]
    with_stack: bool
    record_shapes: bool
    detailed_annotations: bool
    profile_id: str
    start_step: int | None = 1  # the next forward step; None where the version has no start_step

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"output_dir": self.output_dir, "num_steps": self.num_steps,
                                "activities": list(self.activities), "with_stack": self.with_stack,
                                "record_shapes": self.record_shapes, "profile_id": self.profile_id}
        if self.start_step is not None:
            body["start_step"] = self.start_step
        if self.detailed_annotations:  # only where the version has the field
            body["detailed_annotations"] = True
        return body

    def ours(self, name: str) -> bool:
        """A trace file of this profile: `<profile_id>-TP-<r>[-DP-<d>][-PP-<p>][-EP-<e>].trace.json[.gz]`."""
        return _RANK_FILE.fullmatch(name[len(self.profile_id):]) is not None and name.startswith(self.profile_id)


_RANK_FILE = re.compile(r"-TP-\d+(?:-DP-\d+)?(?:-PP-\d+)?(?:-EP-\d+)?\.trace\.json(?:\.gz)?")


def new_profile_id() -> str:
    """A profile id of this capture's own: the trace files' names start with it."""
    return f"spanfix-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def activities(info: ServerInfo) -> tuple[str, ...]:
    """What the server's profiler can record: the host always (CPU); the device where SGLang has one to
    profile: "GPU" for CUDA and ROCm (both torch's CUDA activity) and Ascend NPUs (SGLang maps CUDA to
    its NPU activity), "XPU" for Intel GPUs. A CPU server (device "cpu") records the host alone."""
    device = info.device.lower()
    if device in ("cuda", "gpu", "hip", "rocm", "npu", "musa"):
        return ("CPU", "GPU")
    if device == "xpu":
        return ("CPU", "XPU")
    return ("CPU",)


def has_start_step(info: ServerInfo) -> bool:
    version = info.version_tuple
    return version is None or version >= START_STEP_SINCE or version == (0, 0, 0)


def stacks_by_default(info: ServerInfo) -> bool:
    """Python stacks unless the server's SGLang names draft and verify steps itself (0.5.20 on): before
    it, the call stacks are the strongest evidence of which model ran a step; an unknown version has them."""
    version = info.version_tuple
    return version is None or (version < NEW_NAMES_SINCE and version != (0, 0, 0))


def has_detailed(info: ServerInfo) -> bool | None:
    """Does the server's version take detailed_annotations? None when its version does not read as one."""
    version = info.version_tuple
    if version is None:
        return None
    return version >= DETAILED_SINCE or version == (0, 0, 0)  # 0.0.0: a build from a source tree, new


class Refused(ServerError):
    """The server answered /start_profile, and not with a start: no profile of ours runs there."""


def start(server: Server, request: ProfileRequest) -> None:
    """POST /start_profile. Refused when the server says no: a 500 is SGLang's answer when a scheduler
    refused it, which for a start with start_step is a profile already in progress (profiler_manager.py:
    `_init_profile`'s "Profiling is already in progress. Call /stop_profile first."). Another
    ServerError (no answer) leaves it unknown whether the profile was armed."""
    answer = server.post("/start_profile", request.body())
    if answer.ok:
        return
    if answer.status == 500:
        raise Refused(f"{server.url} is profiling already (POST /start_profile answered 500; SGLang refuses a "
                      "second profile): let it finish, or end it with POST /stop_profile")
    if answer.status in (401, 403):
        raise Refused(f"{server.url} refused POST /start_profile ({answer.said()}): the server asks for an "
                          "admin API key, which spanfix capture does not send")
    raise Refused(f"{server.url}: POST /start_profile answered {answer.said()}")


def stop(server: Server) -> bool:
    """POST /stop_profile: True when it stopped a profile in progress (every rank has written its trace
    when it answers), False when none was (it had stopped by itself). ServerError when unreachable."""
    answer = server.post("/stop_profile", read_timeout=STOP_TIMEOUT)
    return answer.ok


@dataclass
class Found:
    """The trace files seen so far: every one of this profile's (name -> size), and the whole ones."""

    names: dict[str, int]
    whole: list[str]


class Traces:
    """A profile's trace files, where the server writes them (`where`: the folder as this machine sees
    it, a local path or a URL), brought into the capture's folder once whole (when `where` is not that
    folder, a copy). `expected`: how many (one per scheduler). A file of this profile's that is a
    symbolic link is refused (LinkRefused), never read through nor kept (folder.py)."""

    def __init__(self, where: str, folder: CaptureFolder, request: ProfileRequest, expected: int):
        self.where, self.folder, self.request, self.expected = where, folder, request, expected
        self.remote = is_url(where)
        self.same = not self.remote and os.path.abspath(local_path(where)) == os.path.abspath(folder.path)
        self._sizes: dict[str, int] = {}  # name -> size at the last look
        self._whole: dict[str, str] = {}  # name -> its path in folder, once whole there

    def look(self) -> Found:
        """One look: which of this profile's files are there, and which are whole now (copied in)."""
        listed = self._listed()
        for name, size in sorted(listed.items()):
            if name in self._whole:
                continue
            steady = size > 0 and self._sizes.get(name) == size  # unchanged since the last look
            if steady and self._bring(name, size):
                self._whole[name] = self.folder.join(name)
        self._sizes = listed
        return Found(listed, self.paths())

    @property
    def done(self) -> bool:
        return len(self._whole) >= self.expected

    def paths(self) -> list[str]:
        return sorted(self._whole.values())

    def names(self) -> list[str]:
        """Every file of this profile seen in the capture's folder (what a failed capture removes)."""
        return sorted(name for name in self.folder.entries() if self.request.ours(name)
                      or name.startswith(f"{self.request.profile_id}-cancelled"))

    def _listed(self) -> dict[str, int]:
        if self.remote:
            from ..sources import expand
            from ..sources.store import size_of

            found = expand([join(self.where, f"{self.request.profile_id}-*")])
            names = {}
            for url in found.names:
                name = url.rstrip("/").rsplit("/", 1)[-1]
                if self.request.ours(name):
                    names[name] = size_of(url) or 0
            return names
        names = {}
        where: str | int = self.folder.fd if self.same else local_path(self.where)
        with contextlib.suppress(FileNotFoundError, NotADirectoryError), os.scandir(where) as entries:
            for entry in entries:
                if not self.request.ours(entry.name):
                    continue
                if entry.is_symlink():
                    self._refuse_link(entry.name)
                with contextlib.suppress(OSError):
                    if entry.is_file(follow_symlinks=False):
                        names[entry.name] = entry.stat(follow_symlinks=False).st_size
        return names

    def _refuse_link(self, name: str) -> None:
        if self.same:
            error = linked(self.folder.join(name), self.folder.fd, name)
            self.folder.remove([name])  # the link itself: the server then writes a file of its own there
        else:
            error = LinkRefused(f"{os.path.join(local_path(self.where), name)}: is a symbolic link, not a trace the "
                                "server wrote: refused (spanfix reads no trace through a link in a folder it does "
                                "not own)")
        raise error

    def _bring(self, name: str, size: int) -> bool:
        """The file in the folder, whole: True; not whole yet (its gzip stream has not ended): False."""
        if self.same:
            try:
                with self.folder.open_trace(name) as stream:
                    return is_whole(stream)
            except LinkRefused:
                self._refuse_link(name)
            except OSError:
                return False
        try:
            with self.folder.lines(name) as out:
                if self.remote:
                    _download(join(self.where, name), out.stream.fileno())
                else:
                    self._copy_local(name, out.stream)
                with out.reader() as check:
                    if not is_whole(check):
                        raise _NotWhole
        except (_NotWhole, OSError, TraceError):
            return False
        return True

    def _copy_local(self, name: str, out: BinaryIO) -> None:
        path = os.path.join(local_path(self.where), name)
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            if os.path.islink(path):
                self._refuse_link(name)
            raise
        with os.fdopen(fd, "rb") as source:
            if not stat.S_ISREG(os.fstat(source.fileno()).st_mode):
                raise OSError(f"{path}: not a regular file")
            shutil.copyfileobj(source, out, 8 * 2**20)


class _NotWhole(Exception):
    """A copy not whole yet: removed, taken again at the next look."""


def is_whole(path: str | BinaryIO) -> bool:
    """A trace file written to its end: a gzip stream that ends (with its trailer), or JSON whose last
    byte closes it. A file still being written fails. path: a path, or a stream open for reading."""
    try:
        with open(path, "rb") if isinstance(path, str) else contextlib.nullcontext(path) as stream:
            if stream.read(2) != b"\x1f\x8b":
                stream.seek(0, os.SEEK_END)
                if stream.tell() == 0:
                    return False
                stream.seek(-1, os.SEEK_END)
                return stream.read(1) in (b"}", b"]")
            stream.seek(0)
            inflater = zlib.decompressobj(wbits=31)
            while chunk := stream.read(4 * 2**20):
                inflater.decompress(chunk, 2**20)
                while inflater.unconsumed_tail:
                    inflater.decompress(inflater.unconsumed_tail, 2**20)
                if inflater.eof:
                    return True
            return inflater.eof
    except (OSError, zlib.error, EOFError):
        return False


def _download(url: str, fd: int) -> None:
    from ..sources.isolated import isolated

    isolated(url, _download_here, url, fd)


def _download_here(url: str, fd: int) -> None:
    """The object at url into the open file fd (a temporary file of the capture's folder: written by
    descriptor, in a child or here, never by a name that could be swapped)."""
    from ..sources.store import failure, opened

    try:
        with opened(url, 8 * 2**20) as (stream, _size), os.fdopen(os.dup(fd), "wb") as out:
            shutil.copyfileobj(stream, out, 8 * 2**20)
    except OSError:
        raise
    except Exception as exc:  # noqa: BLE001 - a store's errors are many; each becomes one line
        raise TraceError(f"{url}: cannot read: {failure(exc)}") from None


STOPPED, FINISHED, CANCELLED = "stopped", "finished", "cancelled"


def end(server: Server, traces: Traces, say: Callable[[str], None]) -> str | None:
    """End the profile this capture asked for, whatever else is going wrong, and say what came of it:
    STOPPED (it ran; what it recorded is written), FINISHED (it had stopped by itself), CANCELLED (armed,
    it had not started: disarmed, so that it never starts), None (the server did not answer)."""
    say("ending its profile (POST /stop_profile; a profile that ran writes what it recorded first)")
    try:
        if stop(server):
            say("the profiler was stopped (POST /stop_profile)")
            return STOPPED
        traces.look()
        traces.look()  # twice: a file is taken once steady
        if traces.done or traces.request.start_step is None:
            say("the profiler had stopped by itself")
            return FINISHED
        cancel(server, traces.request, None if traces.remote else local_path(traces.where))
    except SpanfixError as exc:
        say(f"could not stop the profiler: {exc}")
        return None
    say("the profile had not started (no forward step yet): cancelled, so that it never will")
    return CANCELLED


def cancel(server: Server, request: ProfileRequest, here: str | None) -> None:
    """Disarm a profile armed with start_step that has not started: a start without start_step, then a
    stop, which clears the armed step (profiler_manager.py, _stop_profile). That start writes a short
    trace of its own, `<profile_id>-cancelled-TP-<r>...`, removed from `here` (the server's folder as
    this machine sees it, if it does)."""
    short = ProfileRequest(request.output_dir, 0, ("CPU",), False, False, False, f"{request.profile_id}-cancelled",
                           start_step=None)
    body = short.body()
    del body["num_steps"]
    answer = server.post("/start_profile", body)
    if not answer.ok:
        raise ServerError(f"{server.url}: POST /start_profile answered {answer.said()}")
    stop(server)
    if here is None:
        return
    with contextlib.suppress(OSError), os.scandir(here) as entries:
        for entry in entries:
            if short.ours(entry.name):
                os.unlink(entry.path)


__all__ = ["CANCELLED", "DETAILED_SINCE", "FINISHED", "NEW_NAMES_SINCE", "START_STEP_SINCE", "STOPPED", "Found",
           "ProfileRequest", "Refused", "ServerError", "Traces", "activities", "cancel", "end", "has_detailed",
           "has_start_step", "is_whole", "new_profile_id", "stacks_by_default", "start", "stop"]

"""Traffic for the profiler to record: N requests at once to SGLang's native `/generate`, greedy
(temperature 0) and of a fixed length (`max_new_tokens`, `ignore_eos`), each slot sending its next
request as soon as its last one is answered, until told to stop. Every response goes to the sink as
it arrives, one JSON line, as SGLang answered it (`text`, `meta_info`: `completion_tokens`,
`spec_verify_ct`, `spec_accept_length`, `e2e_latency`, ...) less its secrets (server.redacted): none
is kept, so that memory holds the responses in flight, not every one of the load.

The prompts: a file (`--prompts FILE`: one prompt a line; a line that is a JSON string, or an object
with "text" or "prompt", may hold several lines; read as a side file, read/side.py: a named pipe no
program writes to is waited for, saying so), or a few built-in ones (code and prose, so that a
draft model has something to predict).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Protocol

import orjson

from ..errors import SpanfixError, TraceError, UsageError
from .server import Server, ServerError, redacted

BUILT_IN_PROMPTS = (
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
    "import os\nimport sys\n\nclass Config:\n    def __init__(self, path):",
    "for i in range(10):\n    for j in range(10):\n        print(i, j)\n",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "while True:\n    line = f.readline()\n    if not line:\n        break",
    "x = [1, 2, 3, 4, 5]\ny = [a * a for a in x]\nprint(y)",
    "try:\n    import json\nexcept ImportError:\n    json = None\n",
    "Speculative decoding drafts several tokens with a small model and verifies them",
)
MAX_PROMPTS_BYTES = 64 * 2**20


def read_prompts(path: str) -> list[str]:
    """The prompts of a file, in order (UsageError when there are none, or it cannot be read). Read as
    every side file is (read/side.py): a named pipe is waited for, saying so, a terminal or a device
    refused, at most MAX_PROMPTS_BYTES."""
    from ..read.side import SideFile

    try:
        lines = [text.decode("utf-8", "replace") for _, text in SideFile(path, MAX_PROMPTS_BYTES).lines()]
    except TraceError as exc:
        raise UsageError(f"cannot read the prompts: {exc}") from None
    prompts = []
    for line in lines:
        if not line.strip():
            continue
        prompt: Any = line
        if line.lstrip().startswith(("{", '"')):
            try:
                value = orjson.loads(line)
            except orjson.JSONDecodeError:
                value = line
            if isinstance(value, dict):
                value = value.get("text", value.get("prompt"))
            if isinstance(value, str):
                prompt = value
        prompts.append(prompt)
    if not prompts:
        raise UsageError(f"{path}: no prompt in it (one a line)")
    return prompts


def generate_body(prompt: str, max_new_tokens: int) -> dict[str, Any]:
    """One greedy request of exactly max_new_tokens tokens (ignore_eos: the same work every time)."""
    return {"text": prompt, "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens,
                                                "ignore_eos": True}}


class Sink(Protocol):
    """Where the responses go as they come: one JSON line each (folder.Lines)."""

    def write(self, data: bytes) -> None: ...


class Load:
    """`concurrency` slots, each a thread sending /generate requests one after the other. start() them;
    stop() lets each finish the request it is in and send no other; join() waits for that; abort()
    cuts the requests in flight. responses: how many answers came; each is written to the sink as it
    comes (none is kept); failure: the first request that failed (the load then stops)."""

    def __init__(self, url: str, prompts: Sequence[str], concurrency: int, max_new_tokens: int, read_timeout: float,
                 sink: Sink | None = None):
        self.server = Server(url, read_timeout=read_timeout)  # its own: abort() cuts these calls alone
        self.prompts, self.concurrency, self.max_new_tokens = list(prompts), concurrency, max_new_tokens
        self.sink = sink
        self.responses = 0
        self.failure: SpanfixError | None = None
        self._next = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._aborted = False
        self._threads: list[threading.Thread] = []

    def warm_up(self, max_new_tokens: int) -> None:
        """One round of `concurrency` short requests at once, outside the profile: the first requests of
        a fresh server compile and allocate for their batch sizes, which a profile should not record.
        Raises the first failure."""
        self._round(max_new_tokens, "warm-up")

    def timed_round(self) -> list[object]:
        """One round of `concurrency` requests of max_new_tokens at once, outside the profile: each
        answer's meta_info, in no order (throughput.py times the round by them). Raises the first failure."""
        kept: list[object] = []
        self._round(self.max_new_tokens, "unprofiled", kept)
        return kept

    def _round(self, max_new_tokens: int, name: str, kept: list[object] | None = None) -> None:
        """`concurrency` requests at once outside the profile, waited for; raises the first failure."""
        threads: list[threading.Thread] = []
        self._run([threading.Thread(target=self._one, args=(i, max_new_tokens, False, kept), daemon=True,
                                    name=f"spanfix-{name}-{i}")
                   for i in range(self.concurrency)], threads)
        for thread in threads:
            thread.join()
        if self.failure is not None:
            raise self.failure

    def start(self) -> None:
        self._stopping.clear()
        self._threads = []
        self._run([threading.Thread(target=self._slot, daemon=True, name=f"spanfix-load-{i}")
                   for i in range(self.concurrency)], self._threads)

    def _run(self, threads: list[threading.Thread], started: list[threading.Thread]) -> None:
        """Start each thread, listing it in `started` once it runs: a Ctrl-C or a thread the system
        refuses midway aborts the load and joins those only (joining one never started is an error that
        would hide the interruption)."""
        try:
            for thread in threads:
                thread.start()
                started.append(thread)
        except BaseException:
            self.abort(started)
            raise

    def stop(self) -> None:
        self._stopping.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for every slot to end (True), or until timeout (False: some are still in a request)."""
        import time

        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in self._threads:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(left)
        return not any(thread.is_alive() for thread in self._threads)

    def abort(self, started: Sequence[threading.Thread] = ()) -> None:
        """Stop now: no new request, the ones in flight cut (their connections closed), slots (and the
        `started` threads of a round) joined."""
        with self._lock:
            self._aborted = True
        self._stopping.set()
        self.server.abort()
        for thread in {*self._threads, *started}:
            thread.join(5.0)

    def _slot(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                index, self._next = self._next, self._next + 1
            if not self._one(index, self.max_new_tokens, True):
                self._stopping.set()
                return

    def _one(self, index: int, max_new_tokens: int, keep: bool, meta: list[object] | None = None) -> bool:
        prompt = self.prompts[index % len(self.prompts)]
        try:
            answer = self.server.post("/generate", generate_body(prompt, max_new_tokens))
            if not answer.ok:
                raise ServerError(f"{self.server.url}: POST /generate answered {answer.said()}")
            response = answer.json()
            if isinstance(response, list) and len(response) == 1:
                response = response[0]
            if not isinstance(response, dict):
                raise ServerError(f"{self.server.url}: POST /generate answered something other than a response "
                                  "object")
            if meta is not None:
                with self._lock:
                    meta.append(response.get("meta_info"))
            if keep:
                line = _line(response, self.server.url)
                with self._lock:
                    if self._stopping.is_set() and self._aborted:
                        return False  # cut: the capture is being given up
                    if self.sink is not None:
                        self.sink.write(line)
                    self.responses += 1
        except SpanfixError as exc:
            with self._lock:
                if self.failure is None and not (self._stopping.is_set() and "abandoned" in str(exc)):
                    self.failure = exc
            return False
        return True


def _line(response: dict[str, Any], url: str) -> bytes:
    """A response as one line of requests.jsonl, less its secrets."""
    try:
        return orjson.dumps(redacted(response), default=str) + b"\n"
    except TypeError as exc:  # orjson: nested past 254 levels, an integer past 64 bits
        raise ServerError(f"{url}: POST /generate answered a response spanfix cannot write ({exc})") from None


__all__ = ["BUILT_IN_PROMPTS", "Load", "generate_body", "read_prompts"]

"""capture: profile a running SGLang server and keep everything that makes its verdict exact.

`capture(url, folder)` reads the server's `/server_info`, starts its profiler (`/start_profile`: an
output folder, `num_steps`, the activities it has, `with_stack`, `record_shapes`, detailed annotations
where its version has them), optionally sends it traffic (`load=N` concurrent greedy `/generate`
requests), waits until every rank's trace is written whole, and leaves in the folder:

- the trace files, as SGLang wrote them (one per rank), copied in when the server writes elsewhere;
- `server_args.json`: `/server_info` before the capture, less `internal_states` (spanfix reads it beside
  the traces for the algorithm and the draft settings);
- `server_info.json`: `/server_info` after the capture (its `avg_spec_accept_length` covers it);
- `requests.jsonl` (with a load): one `/generate` response a line, `meta_info` and all.

The files are written into the folder without following links (folder.py), and pass through the
redaction of everything spanfix prints: secrets among the server's arguments (`api_key`,
`admin_api_key`, passwords, tokens, at any depth) are written as `<redacted>`, and a URL's password or
credential query values (in `model_path`, `launch_command`, ...) as `***`. A capture that fails or is
stopped leaves nothing: what it wrote is removed. Then, unless `verdict=False`, it measures the
traces as `stats()` does, with `server_info.json` as spec_metrics where it has an accept length, and
returns both. `twin=URL` captures
a server without speculation the same way, into `folder/plain` (the first into `folder/spec`), and
measures the first against it. `load=[1, 4, 16]` is a sweep: each load profiled on each server in turn
(every load on the first server, then every load on the twin: one server at a time), its traces and
requests named by their load (`load4-TP-0.trace.json.gz`, `load4.requests.jsonl`); with a twin, each
load also gets an unprofiled round on both servers, timed by the answers (throughput.py), beside that
load's profiled speedup (sweep.py: `result.sweep`). The library never prints: what it has to say while it waits goes to
a Watcher. Every failure is one line: ServerError (the server), UsageError (the arguments),
OutputError (the folder); Ctrl-C stops the profiler it started before it goes on (a second Ctrl-C
does not wait for the server, and says what it left running).

The rooms: options.py (how to profile: CaptureOptions, checked when made), session.py (one capture,
start to end), server.py (the HTTP API, every answer within a deadline), profile.py (the profiler and
its trace files), load.py (the traffic), folder.py (the folder shared with the server), results.py
(what comes back, and its verdict), throughput.py (the unprofiled round's figure), sweep.py (each
load's profiled and unprofiled speedups).
"""

from __future__ import annotations

from .options import DEFAULT_MAX_NEW_TOKENS, DEFAULT_STEPS, DEFAULT_TIMEOUT, CaptureOptions
from .options import LIMITS as CAPTURE_LIMITS
from .results import Capture, CaptureResult, LoadRun, Status, Watcher, capture_verdict
from .server import ServerError
from .session import capture
from .sweep import LoadVerdict, Sweep, sweep_verdicts
from .throughput import Throughput

# Their public names (spanfix.CaptureWatcher, spanfix.CaptureStatus): outside this room, a watcher of what.
CaptureWatcher, CaptureStatus = Watcher, Status

__all__ = ["CAPTURE_LIMITS", "DEFAULT_MAX_NEW_TOKENS", "DEFAULT_STEPS", "DEFAULT_TIMEOUT", "Capture", "CaptureOptions",
           "CaptureResult", "CaptureStatus", "CaptureWatcher", "LoadRun", "LoadVerdict", "ServerError", "Status", "Sweep",
           "Throughput", "Watcher", "capture", "capture_verdict", "sweep_verdicts"]

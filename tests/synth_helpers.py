"""Small event lists shared by tests that need a realistic trace but not a specific one."""

from synth import SynthSpec, generate


def eagle_events(unnamed_e: bool = False) -> list[dict]:
    events = generate(SynthSpec(algorithm="eagle", cuda_graph=False, seed=11)).events
    if unnamed_e:  # a B/E pair whose E has no name, as catapult and Kineto write them
        events = [*events, {"ph": "B", "name": "x", "pid": 1, "tid": 1, "ts": 1}, {"ph": "E", "pid": 1, "tid": 1, "ts": 2}]
    return [{k: (float(v) if k in ("ts", "dur") else v) for k, v in e.items()} for e in events]

"""What the cases of issue 28 (test_verdict.py before it was filed by room) share across the
rooms they now sit in.

The cases' common ground, as the old file said it:

One verdict a user can trust (issue 28): does speculation pay, on the clock that bounds the decode
iteration, like for like, never pooled across unlike runs. Every figure is checked against the
generator's truth (tests/synth): the decode iterations' windows and kernels of the speculative run
and of its plain twin, and every request's accept length."""

import json

import synth
from click.testing import CliRunner

from spanfix.cli import main


def _spec(algorithm, graph=True, **fields):
    return synth.SynthSpec(**{"algorithm": algorithm, "cuda_graph": graph, "detailed": True, "decode_iterations": 6,
                              "seed": 11, **fields})


def _write(tmp_path, trace, name="t-TP-0.trace.json", server_args=True):
    folder = tmp_path / name.replace(".", "_")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    synth.write(trace, path)
    if server_args:
        (folder / "server_args.json").write_text(json.dumps(trace.server_args))
    return path


def _written_pair(tmp_path, spec):
    """A speculative capture of spec and its plain twin, each in its own folder with server_args.json."""
    return _write(tmp_path, synth.generate(spec)), _write(tmp_path, synth.generate(synth.plain_twin(spec)),
                                                        "plain-TP-0.trace.json")


def run(*args, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], **kwargs)


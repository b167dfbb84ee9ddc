"""Which captures are one run: the same configuration (the algorithm, its draft settings, CUDA graphs
or eager, the model), whatever their batch sizes or ranks. A speculation verdict is one run's against
its plain twin: unlike runs are never pooled into one figure, and a twin unlike its run (another
graph mode, another model) gives none.

Each capture's configuration is the RunConfig it says of itself (attribution/config.py, made once
after attribution and carried on TraceMeasures.config): here the server arguments a --spec-metrics
file names fill in what it leaves unsaid (RunConfig.told), and captures that agree are grouped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..attribution.config import RunConfig
from .measure import SpeculationMeasures


@dataclass(slots=True)
class Run:
    """Captures of one configuration."""

    config: RunConfig
    members: list[SpeculationMeasures] = field(default_factory=list)

    @property
    def sources(self) -> list[str]:
        return [m.source for m in self.members]

    @property
    def batch_sizes(self) -> list[int]:
        return sorted({it.bs for m in self.members for it in m.iterations if it.bs is not None}
                      | {bs for m in self.members for bs, _ in m.plain_iterations if bs is not None})

    def to_json(self) -> dict:
        return {**self.config.to_json(), "inputs": self.sources, "batch_sizes": self.batch_sizes}


def group_runs(measures: Iterable[SpeculationMeasures], server: dict | None = None) -> list[Run]:
    """The captures grouped into runs, in the order their first capture came: each joins the first run
    whose configuration agrees with its own (server: what a --spec-metrics file says of the server, which
    fills in what a capture leaves unsaid)."""
    runs: list[Run] = []
    for found in measures:
        config = found.config.told(server) if server else found.config
        run = next((run for run in runs if run.config.agrees(config)), None)
        if run is None:
            runs.append(Run(config, [found]))
        else:
            run.config = run.config.merged(config)
            run.members.append(found)
    return runs

"""Does speculation pay? The draft model's whole cost, tokens per iteration, and the speedup over
plain decoding: a room of its own beside timing/, which it reads and which never imports it.

Data flows one way: timing.measure calls measure.measure_speculation (its `then`) with the same
read, index, attribution and device work; model.py makes the model view (whose work the time
was, on both clocks), accept.py the accept length from the verify spans' g_sk, metrics.py reads
what SGLang writes about acceptance (`--spec-metrics`), baseline.py a plain-decode baseline,
configs.py groups captures into runs (one configuration each), speed.py compares a run with its plain
twin like for like per batch size and clock (certainty.py: which iterations its means stand on, and
their 95% intervals), verdict.py gives the one verdict on the clock that bounds the decode iteration
and says how sure it is, result.py puts several traces together, and compare.py puts runs side
by side (sweep.py: SGLang's own sweep beside them). check's `model.*` and `speculation.*` budget
families are checking/speculation_budgets.py's.
Definitions: docs/stats.md, "Speculation".
"""

from ..attribution.config import RunConfig
from .accept import Acceptance, acceptances, cpu_lengths_kept
from .baseline import plain_from_json, plain_of
from .configs import Run, group_runs
from .measure import SpecIteration, SpeculationMeasures, measure_speculation
from .metrics import (
    BENCH,
    LOG,
    SERVER_INFO,
    STATED,
    TRACE,
    AcceptFigure,
    MetricsError,
    NoAcceptLength,
    read_spec_metrics,
    stated,
)
from .model import DEVICE_MODEL_PARTS, MODEL_PARTS, ModelTime, model_view
from .plain import PlainDecode
from .result import SpeculationResult, server_of, speculation_result
from .speed import SpeedRow
from .verdict import Verdict

__all__ = [
    "BENCH", "DEVICE_MODEL_PARTS", "LOG", "MODEL_PARTS", "SERVER_INFO", "STATED", "TRACE", "AcceptFigure",
    "Acceptance", "MetricsError", "ModelTime", "NoAcceptLength", "PlainDecode", "Run", "RunConfig", "SpecIteration",
    "SpeculationMeasures", "SpeculationResult", "SpeedRow", "Verdict", "acceptances", "cpu_lengths_kept",
    "group_runs", "measure_speculation", "model_view", "plain_from_json", "plain_of",
    "read_spec_metrics", "server_of", "speculation_result", "stated",
]

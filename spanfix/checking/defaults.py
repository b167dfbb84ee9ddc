"""check's defaults, in a module of their own: api.check() names them in its signature, and a
relabel (which imports api) should not pay for importing the gate and the stats beneath it."""

from __future__ import annotations

DEFAULT_MAX_REGRESSION = 10.0  # percent
# Below this many spans (or iterations) on either side, a mean moves by noise as much as by change: a
# regression is not judged on so little (the report says so).
DEFAULT_MIN_COUNT = 20

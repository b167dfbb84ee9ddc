"""Several runs measured as stats, check and the report measure them (measure.py), and where the
per-file work runs: this process, local processes, an executor or a Dask cluster (tasks.py)."""

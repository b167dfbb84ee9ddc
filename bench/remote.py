"""What URLs and --scheduler cost (docs/performance.md, URLs and --scheduler), on this machine.

Starts moto's S3 server on 127.0.0.1 (as the tests do, tests/remote_servers.py) and a Dask
cluster of a scheduler and two worker processes of one thread, puts the bench trace (bench/run.py builds it)
in a bucket, and times, interleaved (one run of each command per round, so that the machine's load
falls on all alike):

- reading from the local S3 server against reading the same local file: `stats` and `relabel` of
  the .json.gz and the .json;
- `--scheduler` with 2 workers against `-j 2`: `stats` of N copies of the .json.gz, from S3.

Wall time is the median over the rounds; peak RSS is the spanfix process's (os.wait4), which with
--scheduler is the client's only. Needs the test-remote extra: pip install -e '.[test-remote]'.

    python bench/remote.py                  # 250 MB, 3 rounds, 4 files for the cluster runs
    python bench/remote.py --size-mb 50 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from run import MB, make_trace, scratch_folder, spanfix

FIXTURE = HERE.parent / "fixtures" / "eagle-stock.trace.json.gz"

# The command runs in a grandchild started by a small launcher: Linux gives a process the peak RSS of
# the one it was forked from as its own starting peak, and this process holds a cluster and boto3.
_LAUNCH = """import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
open(sys.argv[1], "w").write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status))"""


def run_once(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one run of argv, its output discarded."""
    with tempfile.NamedTemporaryFile("r") as report:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _LAUNCH, report.name, *argv], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, check=False)
        elapsed = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"bench: command failed ({done.returncode}): {' '.join(argv)}")
        return elapsed, int(report.read()) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=int, default=250)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=4, help="copies of the trace for the cluster runs")
    parser.add_argument("--out", type=Path, default=HERE / "out")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    plain, packed = make_trace(args.out, args.size_mb)
    scratch = scratch_folder(args.out, args.size_mb)

    from remote_servers import environment, start_cluster, start_s3

    objects = {"bench/t.json": plain.read_bytes(), "bench/t.json.gz": packed.read_bytes(),
               "bench/fixture.json.gz": FIXTURE.read_bytes()}
    objects.update({f"bench/many/run-TP-{n}.trace.json.gz": objects["bench/t.json.gz"] for n in range(args.files)})
    local_many = args.out / "many-gz"
    local_many.mkdir(exist_ok=True)
    for n in range(args.files):
        target = local_many / f"run-TP-{n}.trace.json.gz"
        if not target.exists():
            os.link(packed, target)
    log = Path(tempfile.mkdtemp()) / "moto.log"
    server = start_s3(["bench"], [], objects, log)
    del objects
    try:
        with environment(server.env()):
            cluster = start_cluster(memory_limit="0")
            try:
                address = cluster.scheduler_address
                fetch = ("import sys, fsspec\nfs, path = fsspec.core.url_to_fs(sys.argv[1])\n"
                         "with fs.open(path, 'rb', block_size=2**23, cache_type='none') as f:\n    while f.read(2**23): pass")
                cases = {
                    "fetch only (s3fs, 8 MiB reads), .json": [sys.executable, "-c", fetch, "s3://bench/t.json"],
                    "stats of a 33 kB fixture, local file": spanfix("stats", str(FIXTURE), "--format", "json"),
                    "stats of a 33 kB fixture, from S3": spanfix("stats", "s3://bench/fixture.json.gz", "--format", "json"),
                    "stats .json.gz, local file": spanfix("stats", str(packed), "--format", "json"),
                    "stats .json.gz, from S3": spanfix("stats", "s3://bench/t.json.gz", "--format", "json"),
                    "stats .json, local file": spanfix("stats", str(plain), "--format", "json"),
                    "stats .json, from S3": spanfix("stats", "s3://bench/t.json", "--format", "json"),
                    "relabel .json.gz, local file to local": spanfix("relabel", str(packed), "-o", f"{scratch}/r.json.gz"),
                    "relabel .json.gz, S3 to S3": spanfix("relabel", "s3://bench/t.json.gz", "-o", "s3://bench/r.json.gz"),
                    f"stats {args.files} x .json.gz local, -j 2": spanfix("stats", *sorted(map(str, local_many.iterdir())),
                                                                          "-j", "2", "--format", "json"),
                    f"stats {args.files} x .json.gz S3, -j 2": spanfix("stats", "s3://bench/many/*", "-j", "2",
                                                                       "--format", "json"),
                    f"stats {args.files} x .json.gz S3, --scheduler (2 workers)":
                        spanfix("stats", "s3://bench/many/*", "--scheduler", address, "--format", "json"),
                }
                runs: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
                loads = []
                for round_number in range(args.rounds):
                    loads.append(os.getloadavg()[0])
                    for name, argv in cases.items():
                        runs[name].append(run_once(argv))
                        print(f"  round {round_number + 1}  {name:<52} {runs[name][-1][0]:7.2f} s "
                              f"{runs[name][-1][1]:7.0f} MB", file=sys.stderr, flush=True)
            finally:
                cluster.stop()
    finally:
        server.stop()
    results = {"size_mb": plain.stat().st_size / MB, "packed_mb": packed.stat().st_size / MB, "files": args.files,
               "rounds": args.rounds, "load_1min_at_each_round": loads, "cpus": os.cpu_count(),
               "rows": {name: {"median_s": statistics.median(r[0] for r in found), "runs_s": [r[0] for r in found],
                               "peak_rss_mb": max(r[1] for r in found)} for name, found in runs.items()}}
    (args.out / "remote.json").write_text(json.dumps(results, indent=2))
    print(f"\ntrace {results['size_mb']:.0f} MB ({results['packed_mb']:.0f} MB gzip), {args.rounds} rounds, "
          f"load (1 min) {', '.join(f'{x:.1f}' for x in loads)}", file=sys.stderr)
    for name, row in results["rows"].items():
        print(f"  {name:<52} {row['median_s']:7.2f} s {row['peak_rss_mb']:7.0f} MB", file=sys.stderr)


if __name__ == "__main__":
    main()

"""`make bench`: run every benchmarks/bench_*.py in turn, each as its own process, and
print what it prints. A bench that fails (a command error, a missed target) is reported
and makes this script exit 1 once all have run; one that cannot run here (no official
data) exits 77 and is reported as skipped.

What each bench measured is kept in benchmarks/results.json: its tables and targets
(which common.py notes as it prints them), its whole output, the date and the machine.
That file is the one home of every figure the documentation shows (the Performance page
is built from it): a bench that ran replaces its own entry, one that was skipped leaves
its last entry as it was.

    python benchmarks/run.py              # all
    python benchmarks/run.py foundation   # only bench_foundation.py (names or substrings)

bench_scale.py (issue 17: 1M, 2M and 5M images; about 27 minutes on the shared 2-core
machine at load 5-10, and up to 20 GB of temporary disk under /tmp) runs with the others;
BENCH_SCALE_SIZES=100k,300k runs it small.
"""

import ast
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
SKIP_EXIT = 77


def run_bench(bench):
    """Run one bench, its output shown as it comes: (exit code, output, records)."""
    with tempfile.TemporaryDirectory(prefix="mnistconv-bench-record-") as tmp:
        record = Path(tmp) / "record.jsonl"
        env = dict(os.environ, MNISTCONV_BENCH_RECORD=str(record))
        lines = []
        with subprocess.Popen([sys.executable, str(bench)], cwd=HERE.parent, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace") as proc:
            for line in proc.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                lines.append(line)
        records = [json.loads(line) for line in record.read_text().splitlines()] \
            if record.exists() else []
    return proc.returncode, "".join(lines), records


def keep(bench, outcome, output, records):
    """The bench's entry of results.json, replaced with what this run measured."""
    data = json.loads(RESULTS.read_text(encoding="utf-8")) if RESULTS.exists() else {
        "about": "Every benchmark figure the documentation shows; see benchmarks/run.py.",
        "benches": {}}
    doc = ast.get_docstring(ast.parse(bench.read_text(encoding="utf-8"))) or bench.stem
    # The docstring's first sentence says what the bench compares.
    title = " ".join(doc.split("\n\n")[0].split())
    for cut in (", as whole processes", " (see ", ". "):
        title = title.split(cut)[0]
    now = datetime.datetime.now(datetime.timezone.utc)
    data["benches"][bench.stem] = {
        "title": f"{bench.name}: {title.rstrip(':.')}",
        "date": now.strftime("%Y-%m-%d %H:%M UTC"),
        "source": f"make bench ({outcome}) on {os.cpu_count()} cores, Python "
                  f"{platform.python_version()}, {platform.machine()}",
        "tables": [{k: r[k] for k in ("title", "columns", "rows")}
                   for r in records if r["kind"] == "table"],
        "targets": [{"description": r["description"], "met": r["met"]}
                    for r in records if r["kind"] == "target"],
        "output": output,
    }
    staged = RESULTS.with_suffix(".json.tmp")
    staged.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n",
                      encoding="utf-8")
    os.replace(staged, RESULTS)


def main(argv):
    benches = sorted(HERE.glob("bench_*.py"))
    if argv:
        benches = [b for b in benches if any(a in b.stem for a in argv)]
        if not benches:
            print(f"no benchmark matches {' '.join(argv)}", file=sys.stderr)
            return 2
    outcomes = []
    for bench in benches:
        print(f"\n=== {bench.name} ===", flush=True)
        started = time.perf_counter()
        code, output, records = run_bench(bench)
        took = time.perf_counter() - started
        outcome = ("passed" if code == 0 else "skipped" if code == SKIP_EXIT
                   else f"FAILED (exit {code})")
        if code != SKIP_EXIT and (records or code == 0):
            keep(bench, outcome, output, records)
        print(f"=== {bench.name}: {outcome} in {took:.0f} s ===", flush=True)
        outcomes.append((bench.name, code, outcome))
    print("\nSummary:")
    for name, _, outcome in outcomes:
        print(f"  {name}: {outcome}")
    failed = [name for name, code, _ in outcomes if code not in (0, SKIP_EXIT)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""`make bench`: run every benchmarks/bench_*.py in turn, each as its own process, and
print what it prints. A bench that fails (a command error, a missed target) is reported and
makes this script exit 1 once all have run; one that cannot run here (no official data)
exits 77 and is reported as skipped.

    python benchmarks/run.py              # all
    python benchmarks/run.py foundation   # only bench_foundation.py (names or substrings)

bench_scale.py (issue 17: 1M, 2M and 5M images; about 27 minutes on the shared 2-core
machine at load 5-10, and up to 20 GB of temporary disk under /tmp) runs with the others;
BENCH_SCALE_SIZES=100k,300k runs it small.
"""

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SKIP_EXIT = 77


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
        code = subprocess.call([sys.executable, str(bench)], cwd=HERE.parent)
        took = time.perf_counter() - started
        outcome = ("passed" if code == 0 else "skipped" if code == SKIP_EXIT
                   else f"FAILED (exit {code})")
        print(f"=== {bench.name}: {outcome} in {took:.0f} s ===", flush=True)
        outcomes.append((bench.name, code, outcome))
    print("\nSummary:")
    for name, _, outcome in outcomes:
        print(f"  {name}: {outcome}")
    failed = [name for name, code, _ in outcomes if code not in (0, SKIP_EXIT)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

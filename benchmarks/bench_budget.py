"""The memory budget (issue 24, class 4): each hostile input of tests/fuzz/bombs.py (all
under 1 MB) and valid images at the 4096 x 4096 size limit, through info, conversions
and the views; peak RSS (GNU time: the largest single process) and wall time.

Targets: every run under 300 MB, and none over 20 s unless the input really holds that
much work (the GDMNIST .bin.gz holds 760,000 images within deflate's bound; the 4096 x
4096 inputs hold 168-335 MB of pixels). A refusal (exit 1, one line) is as good as a
bounded run; the line is printed.

    python benchmarks/bench_budget.py
"""

import os
import subprocess
import sys
import time

from common import GNU_TIME, REPO, Targets, env, mnistconv, require_gnu_time, workdir

sys.path.insert(0, str(REPO / "tests" / "fuzz"))
import bombs  # noqa: E402

LIMIT_MB = 300
LIMIT_SECONDS = 20
# Inputs that really hold the work (see the docstring): their time is reported only.
REAL_WORK = {"gdmnist-gz", "cap-tar", "cap-idx"}


def measure(cmd):
    """(exit code, last stderr line, wall seconds, peak MB) of one run under GNU time."""
    started = time.perf_counter()
    proc = subprocess.run([GNU_TIME, "-f", "%M", *cmd], cwd=REPO, env=env(),
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, errors="replace")
    wall = time.perf_counter() - started
    lines = proc.stderr.strip().splitlines()
    peak_kb = int(lines[-1]) if lines and lines[-1].isdigit() else 0
    said = next((line for line in reversed(lines[:-1]) if line.startswith("Error:")), "")
    code = proc.returncode
    return code, said, wall, peak_kb * 1024 / 1e6


def inputs(work):
    """(name, path) of each input, built under work."""
    yield "qmnist-xz", bombs.qmnist_xz(str(work))
    yield "gdmnist-gz", bombs.gdmnist_gz(str(work))
    yield "hdf5-gzip", bombs.hdf5_gzip(str(work), 200_000)
    yield "parquet-dictionary", bombs.parquet_dictionary(str(work))
    yield "arrayrecord-zstd", bombs.arrayrecord_zstd(str(work))
    tars = work / "tar9400"
    tars.mkdir()
    yield "tar-9400", bombs.tar_of_large_pngs(str(tars), 10, 9400)
    cap = work / "tar4096"
    cap.mkdir()
    yield "cap-tar", bombs.tar_of_large_pngs(str(cap), 10, 4096)
    yield "cap-idx", bombs.idx_of_large_images(str(work), 20, 4096)


def commands(path, out):
    return {
        "info": ["info", path],
        "convert": ["convert", path, out / "o.npz", "-q"],
        "shuffle": ["convert", path, out / "s.npz", "--shuffle", "-q"],
        "show": ["show", path, "--per-class", "2"],
        "preview": ["preview", path, "-o", out / "p.png", "-q"],
        "compare": ["compare", path, path, "-q"],
        "tfrecord-png": ["convert", path, out / "o.tfrecord", "--to", "tfrecord",
                         "--image-format", "png", "-q"],
    }


def size_of(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path)
                   for f in fs)
    return os.path.getsize(path)


def main():
    require_gnu_time()
    targets = Targets()
    rows = []
    with workdir("mnistconv-bench-budget-") as work:
        out = work / "out"
        for name, path in inputs(work):
            print(f"\n{name}: {size_of(path):,} bytes", flush=True)
            for what, args in commands(path, out).items():
                out.mkdir(exist_ok=True)
                code, said, wall, peak = measure(mnistconv(*args))
                subprocess.run(["rm", "-rf", str(out)], check=True)
                said = said.replace(str(work) + os.sep, "")
                shown = f"exit {code}" + (f"  {said[:110]}" if said else "")
                print(f"  {what:<13} {wall:6.1f} s  peak {peak:6.1f} MB  {shown}", flush=True)
                rows.append((name, what, code, wall, peak))
    print("\nTargets:")
    for name, what, code, wall, peak in rows:
        targets.check(code in (0, 1) and peak < LIMIT_MB,
                      f"{name} {what}: exit {code}, {peak:.0f} MB < {LIMIT_MB} MB")
        if name not in REAL_WORK:
            targets.check(wall < LIMIT_SECONDS,
                          f"{name} {what}: {wall:.1f} s < {LIMIT_SECONDS} s")
    targets.exit()


if __name__ == "__main__":
    main()

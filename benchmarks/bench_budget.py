"""The memory budget (issue 24, class 4): peak memory and time of hostile and large
inputs through every kind of command.

The inputs: the bombs of tests/fuzz/bombs.py (all under 1.2 MB), valid images at the
4096 x 4096 size limit, and above it with --max-image-size; through info, conversions
and the views. Peak RSS is GNU time's (the largest single process), one run each.

Targets: every run under 300 MB (views of 9400 x 9400 images under their own bound,
below), and none over 20 s unless the input really holds that much work (the GDMNIST
.bin.gz holds 760,000 images within deflate's bound, the ArrayRecord file a million
records; the 4096 x 4096 and 9400 x 9400 inputs hold 168 MB to 884 MB of pixels). A
refusal (exit 1, one line) is as good as a bounded run; its line is printed. Each
input gets the commands that tell something about it (a bomb refused when read is
refused alike by every command), so the whole bench runs in a few minutes.

    python benchmarks/bench_budget.py
"""

import os
import subprocess
import sys
import time

from common import (GNU_TIME, REPO, Targets, env, mnistconv, record, require_gnu_time,
                    workdir)

sys.path.insert(0, str(REPO / "tests" / "fuzz"))
import bombs  # noqa: E402

LIMIT_MB = 300
LIMIT_SECONDS = 20
# A view of 9400 x 9400 images (88 MB each) holds one image per side and Pillow's
# copy while decoding it: preview two, compare three, beside the interpreter.
RAISED_MB = {"preview": 260, "compare": 360}
# Longer than this a run is stopped and counted as missed: the bench always ends.
STOP_SECONDS = 300
RAISED = ("--max-image-size", "9400x9400")
# Inputs that really hold the work (see the docstring): their time is reported only.
REAL_WORK = {"gdmnist-gz", "arrayrecord-1m", "cap-tar", "cap-idx", "tar-9400-raised"}


def measure(cmd):
    """(exit code or "stopped", last stderr line, wall seconds, peak MB) of one run
    under GNU time."""
    started = time.perf_counter()
    try:
        proc = subprocess.run([GNU_TIME, "-f", "%M", *cmd], cwd=REPO, env=env(),
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, errors="replace",
                              timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        return "stopped", "", time.perf_counter() - started, 0.0
    wall = time.perf_counter() - started
    lines = proc.stderr.strip().splitlines()
    peak_kb = int(lines[-1]) if lines and lines[-1].isdigit() else 0
    said = next((line for line in reversed(lines[:-1]) if line.startswith("Error:")), "")
    return proc.returncode, said, wall, peak_kb * 1024 / 1e6


def cases(work, out):
    """(input name, path, {command name: arguments}) of each input, built under work."""
    def folder(name):
        path = work / name
        path.mkdir()
        return str(path)

    def views(path, *extra):
        return {"preview": ["preview", path, "-o", out / "p.png", "-q", *extra],
                "compare": ["compare", path, path, "-q", *extra]}

    def reads(path):
        return {"info": ["info", path], "convert": ["convert", path, out / "o.npz", "-q"]}

    yield "qmnist-xz", (path := bombs.qmnist_xz(str(work))), reads(path)
    yield "gdmnist-gz", (path := bombs.gdmnist_gz(str(work))), {
        **reads(path), "shuffle": ["convert", path, out / "s.npz", "--shuffle", "-q"]}
    yield "hdf5-gzip", (path := bombs.hdf5_gzip(str(work), 200_000)), reads(path)
    yield "parquet-dictionary", (path := bombs.parquet_dictionary(str(work))), reads(path)
    path = bombs.arrayrecord_zstd(folder("ar"))
    yield "arrayrecord-zstd", path, {"info": ["info", path], **views(path)}
    path = bombs.arrayrecord_zstd(folder("ar1m"), 1_000_000, 28)
    yield "arrayrecord-1m", path, {**reads(path), "show": ["show", path, "--per-class", "2"]}
    path = bombs.tar_of_large_pngs(folder("tar9400"), 10, 9400)
    yield "tar-9400", path, {"info": ["info", path], **views(path)}
    yield "tar-9400-raised", path, views(path, *RAISED)
    path = bombs.tar_of_large_pngs(folder("tar4096"), 10, 4096)
    yield "cap-tar", path, {**views(path), "show": ["show", path, "--per-class", "2"]}
    path = bombs.idx_of_large_images(str(work), 20, 4096)
    yield "cap-idx", path, {"tfrecord-png": ["convert", path, out / "o.tfrecord", "--to",
                                             "tfrecord", "--image-format", "png", "-q"]}


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
        for name, path, commands in cases(work, out):
            size = size_of(path)
            print(f"\n{name}: {size:,} bytes", flush=True)
            for what, args in commands.items():
                out.mkdir(exist_ok=True)
                code, said, wall, peak = measure(mnistconv(*args))
                subprocess.run(["rm", "-rf", str(out)], check=True)
                said = said.replace(str(work) + os.sep, "")
                shown = f"exit {code}" + (f"  {said[:110]}" if said else "")
                print(f"  {what:<13} {wall:6.1f} s  peak {peak:6.1f} MB  {shown}", flush=True)
                rows.append((name, size, what, code, wall, peak, said))
    columns = ["input", "bytes", "command", "exit", "wall s", "peak MB", "refused with"]
    record("table", title="Hostile and large inputs: one run each (GNU time)",
           columns=columns, rows=[[n, f"{s:,}", w, str(c), f"{t:.1f}", f"{p:.1f}", said]
                                  for n, s, w, c, t, p, said in rows])
    print("\nTargets:")
    for name, _, what, code, wall, peak, _ in rows:
        limit = RAISED_MB.get(what, LIMIT_MB) if name == "tar-9400-raised" else LIMIT_MB
        targets.check(code in (0, 1) and peak < limit,
                      f"{name} {what}: exit {code}, {peak:.0f} MB < {limit} MB")
        if name not in REAL_WORK:
            targets.check(wall < LIMIT_SECONDS,
                          f"{name} {what}: {wall:.1f} s < {LIMIT_SECONDS} s")
    targets.exit()


if __name__ == "__main__":
    main()

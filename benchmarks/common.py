"""What every benchmark shares: whole-process timing, peak memory, the official data, and a
table of ratios.

Every measurement is a whole command run as a subprocess, the way a user or a Makefile runs
it, so start-up (interpreter, imports) counts. Each command runs `repeat` times after one
untimed warm-up run; commands measured together are interleaved run by run, so a burst of
load on the machine hits them alike. The figure reported is the median wall time, with
the median CPU time (user + system, steadier when other work shares the machine) beside
it; peak memory is the largest "Maximum resident set size" GNU time (`/usr/bin/time -v`)
saw. Sizes are in MB of 10^6 bytes.

A bench script imports this module (benchmarks/ is on sys.path when run.py starts it) and
exits 0 (all targets met), 1 (a target missed or a command failed) or SKIP_EXIT (it could
not run here, e.g. no ../shared data), which run.py reports as skipped.
"""

import gzip
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
BASELINES = BENCH_DIR / "baselines"
# The official MNIST files live beside the repository in the project's shared folder; a
# user's clone has none, so benches that need them skip. MNIST_DIR points elsewhere.
OFFICIAL_MNIST = Path(os.environ.get("MNIST_DIR", REPO.parent / "shared" / "data" / "mnist"))
MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
               "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
GNU_TIME = "/usr/bin/time"
SKIP_EXIT = 77  # automake's "skipped" code
REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
PY = sys.executable
MB = 1e6
# Set by run.py: the file each table and target is appended to (one JSON object a
# line), which it then keeps in benchmarks/results.json for the documentation.
RECORD = os.environ.get("MNISTCONV_BENCH_RECORD")


def record(kind, **fields):
    """Note a table ("table": title, columns, rows of text) or a target ("target":
    description, met) for run.py; nothing when the bench runs on its own."""
    if RECORD:
        with open(RECORD, "a", encoding="utf-8") as f:
            f.write(json.dumps({"kind": kind, **fields}) + "\n")


def mnistconv(*args):
    """The command line a user types: the `mnistconv` console script installed beside this
    Python (`make bench` installs it), else `python -m mnistconv`. Either way PYTHONPATH
    (env() below) makes it run this checkout's code."""
    script = Path(PY).parent / "mnistconv"
    if os.access(script, os.X_OK):
        return [str(script), *map(str, args)]
    return [PY, "-m", "mnistconv", *map(str, args)]


def python(script, *args):
    """A baseline script run with the same interpreter."""
    return [PY, str(BASELINES / script), *map(str, args)]


def env():
    """The environment for every measured command: the repo importable and nothing
    inherited that changes Python's start-up. PYTHONDONTWRITEBYTECODE (set in some CI and
    sandbox shells) would make every run recompile mnistconv's modules from source while
    numpy's come precompiled from its wheel, which no installed user sees; the warm-up
    run writes the .pyc files (to the git-ignored __pycache__)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    for var in ("PYTHONDONTWRITEBYTECODE", "PYTHONPROFILEIMPORTTIME", "PYTHONTRACEMALLOC",
                "PYTHONDEVMODE"):
        e.pop(var, None)
    return e


def skip(message):
    print(f"SKIPPED: {message}")
    sys.exit(SKIP_EXIT)


def require_gnu_time():
    if not os.access(GNU_TIME, os.X_OK):
        print(f"error: {GNU_TIME} is missing (Debian package `time`; `make bench` installs "
              "it)", file=sys.stderr)
        sys.exit(1)


class Result:
    def __init__(self, name, times, cpu, peak_kb):
        self.name, self.times, self.cpu, self.peak_kb = name, times, cpu, peak_kb

    @property
    def seconds(self):
        return statistics.median(self.times)

    @property
    def cpu_seconds(self):
        """Median user + system CPU time: steadier than wall time on a busy machine."""
        return statistics.median(self.cpu)

    @property
    def peak_mb(self):
        return self.peak_kb * 1024 / MB


class CommandFailed(Exception):
    pass


def run(main):
    """Run a bench's main(): a command that fails ends the bench with its error, exit 1
    (the temporary directory is removed on the way out)."""
    try:
        main()
    except CommandFailed as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


_MAX_RSS = re.compile(r"Maximum resident set size \(kbytes\): (\d+)")
_CPU = re.compile(r"(?:User|System) time \(seconds\): ([\d.]+)")


def run_once(cmd, cwd=None):
    """One run under GNU time: (wall seconds, CPU seconds, peak RSS in KB). Raises
    CommandFailed with the command's own stderr when it fails."""
    started = time.perf_counter()
    proc = subprocess.run([GNU_TIME, "-v", *cmd], cwd=cwd or REPO, env=env(),
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, errors="replace")
    wall = time.perf_counter() - started
    m = _MAX_RSS.search(proc.stderr)
    if proc.returncode != 0 or not m:
        # The command's own stderr, without GNU time's report and exit-status line.
        own = proc.stderr.split("\tCommand being timed:")[0]
        own = "\n".join(line for line in own.splitlines()
                        if not line.startswith(("Command exited with non-zero status",
                                                "Command terminated by signal"))).strip()
        raise CommandFailed(f"{' '.join(cmd)} exited {proc.returncode}:\n{own[-2000:]}")
    return wall, sum(map(float, _CPU.findall(proc.stderr))), int(m.group(1))


def measure(commands, repeat=REPEAT, before=None, fewer=None):
    """Time named commands {name: argv}, interleaved in a rotating order, `repeat` timed
    runs each after one warm-up. `before(name)` runs untimed before every run (e.g. to delete an output).
    `fewer` = {name: n} gives slow baselines n timed runs instead (their median moves
    little and each run costs seconds)."""
    fewer = fewer or {}
    load_before = os.getloadavg()[0]
    times = {name: [] for name in commands}
    cpu = {name: [] for name in commands}
    peaks = {name: 0 for name in commands}
    names = list(commands)
    for i in range(repeat + 1):
        # Each round starts one command later, so every command follows every other
        # equally often: in a fixed order the one after a heavy baseline (TensorFlow's
        # 4 s at full load) always ran in its wake.
        for name in names[i % len(names):] + names[:i % len(names)]:
            cmd = commands[name]
            if i > fewer.get(name, repeat):
                continue
            if before:
                before(name)
            wall, used, peak = run_once(cmd)
            if i:  # the first round warms the page cache and .pyc files
                times[name].append(wall)
                cpu[name].append(used)
            peaks[name] = max(peaks[name], peak)
    results = {name: Result(name, times[name], cpu[name], peaks[name]) for name in commands}
    for r in results.values():
        r.load = (load_before, os.getloadavg()[0])
    return results


def print_table(title, results, reference):
    """Rows of median wall time, its spread, median CPU time, peak memory and the
    wall-time ratio against `reference` (the mnistconv command of the comparison):
    a ratio above 1 means that command takes longer than mnistconv."""
    ref = results[reference].seconds
    width = max(len(r) for r in results) + 2
    columns = ["command", "median s", "min..max s", "cpu s", "peak MB", "time / mnistconv"]
    rows = []
    for name, r in results.items():
        ratio = "1.00 (ref)" if name == reference else f"{r.seconds / ref:.2f}x"
        rows.append([name, f"{r.seconds:.3f}", f"{min(r.times):.3f}..{max(r.times):.3f}",
                     f"{r.cpu_seconds:.2f}", f"{r.peak_mb:.1f}", ratio])
    print(f"\n{title}")
    print(f"  {columns[0]:<{width}} {columns[1]:>9} {columns[2]:>13} {columns[3]:>6} "
          f"{columns[4]:>8} {columns[5]:>17}")
    for row in rows:
        low, high = row[2].split("..")
        print(f"  {row[0]:<{width}} {row[1]:>9} {low:>6}..{high:<6} {row[3]:>6} "
              f"{row[4]:>8} {row[5]:>17}")
    load = getattr(results[reference], "load", None)
    if load:
        # Other work on the machine stretches wall times (not CPU times): say how busy it was.
        note = (f"{os.cpu_count()} cores; load average {load[0]:.1f} before these runs, "
                f"{load[1]:.1f} after")
        print(f"  ({note})")
        title = f"{title} ({note})"
    record("table", title=title, columns=columns, rows=rows)
    sys.stdout.flush()


class Targets:
    """Speed and memory targets: each printed as met or MISSED; exit 1 if any missed."""

    def __init__(self):
        self.missed = []

    def check(self, ok, description):
        print(f"  [{'met' if ok else 'MISSED'}] {description}")
        record("target", description=description, met=bool(ok))
        if not ok:
            self.missed.append(description)

    def exit(self):
        if self.missed:
            print(f"\n{len(self.missed)} target(s) missed")
            sys.exit(1)
        sys.exit(0)


@contextmanager
def workdir(prefix="mnistconv-bench-"):
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def start(who, needs, install, note=""):
    """What a bench against another tool does first: GNU time must be there, the
    official files and the modules `needs` (else skip: "<who> needs ...; pip install
    '<install>'"); then the line saying how the figures were taken. Returns the official
    .gz folder and the Targets to check."""
    require_gnu_time()
    gz = official_gz_dir()
    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    if missing:
        skip(f"{who} needs {' and '.join(missing)}; pip install '{install}'")
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores; median of {REPEAT} "
          f"runs after a warm-up{note}, interleaved")
    return gz, Targets()


def official_gz_dir():
    """The shared folder of the four official .gz files, or skip."""
    missing = [f for f in MNIST_FILES if not (OFFICIAL_MNIST / (f + ".gz")).is_file()]
    if missing:
        skip(f"the official MNIST files are not in {OFFICIAL_MNIST} (missing "
             f"{', '.join(m + '.gz' for m in missing)}); set MNIST_DIR to a folder holding "
             "them to run this benchmark")
    return OFFICIAL_MNIST


def decompressed_copy(into: Path):
    """The four official files decompressed into `into` (canonical names, as python-mnist
    and the numpy recipes expect them). Returns the folder."""
    src = official_gz_dir()
    into.mkdir(parents=True, exist_ok=True)
    for name in MNIST_FILES:
        with gzip.open(src / (name + ".gz"), "rb") as f, open(into / name, "wb") as out:
            shutil.copyfileobj(f, out, 1 << 20)
    return into


def remove(path: Path):
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


# Colour data for bench_cifar.py and bench_medmnist224.py. No network here, so the real
# CIFAR-10 and MedMNIST files cannot be fetched: the images are generated, deterministic
# (numpy seeds), as a smooth field (a 5 x 5 grid of random colours, interpolated) plus
# uniform noise of standard deviation 8.4. That is neither random noise (which no PNG compresses)
# nor a real photograph (whose compression, and so PNG and JPEG encoding time, differs).
CIFAR10_NAMES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                 "ship", "truck")
CIFAR_SIDE = 32


def smooth_noise_images(n, side, seed, channels=3):
    """n x side x side x channels uint8 images: a random 5 x 5 grid of colours, bilinearly
    interpolated, plus uniform noise in -14..14; the same seed gives the same images."""
    import numpy as np
    rng = np.random.default_rng(seed)
    grid = rng.uniform(0, 255, size=(n, 5, 5, channels)).astype(np.float32)
    # Linear interpolation from 5 points to `side` as a (side x 5) matrix, one per axis.
    at = np.linspace(0, 4, side, dtype=np.float32)
    weights = np.maximum(0, 1 - np.abs(at[:, None] - np.arange(5, dtype=np.float32)))
    smooth = np.einsum("yi,nijc,xj->nyxc", weights, grid, weights, optimize=True)
    # Uniform noise in -14..14 (standard deviation 8.4): Gaussian draws took 10x longer.
    smooth += rng.integers(0, 29, size=smooth.shape, dtype=np.uint8)
    smooth -= 14
    return np.clip(smooth, 0, 255).astype(np.uint8)


def write_cifar10_bin(folder: Path, train=50000, test=10000, seed=10):
    """A cifar-10-batches-bin folder as the publisher lays it out: data_batch_1..5.bin
    (train / 5 records each) and test_batch.bin, each record a label byte then the R, G
    and B planes, and batches.meta.txt (the ten names, then a blank line). Returns it."""
    import numpy as np
    folder.mkdir(parents=True, exist_ok=True)
    per = train // 5
    names = [f"data_batch_{b}.bin" for b in range(1, 6)] + ["test_batch.bin"]
    for i, (name, n) in enumerate(zip(names, [per] * 5 + [test])):
        rng = np.random.default_rng(seed * 100 + i)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        images = smooth_noise_images(n, CIFAR_SIDE, seed * 100 + 50 + i)
        records = np.empty((n, 1 + 3 * CIFAR_SIDE * CIFAR_SIDE), np.uint8)
        records[:, 0] = labels
        records[:, 1:] = images.transpose(0, 3, 1, 2).reshape(n, -1)
        records.tofile(folder / name)
    (folder / "batches.meta.txt").write_text("\n".join(CIFAR10_NAMES) + "\n\n")
    return folder


def load_arrays(kind, source, split="train"):
    """What a user's script loads before it writes: (images, labels, class names) of a
    split, read with gzip and numpy. kind "mnist": the official .gz folder, images
    N x 28 x 28; kind "cifar10": a cifar-10-batches-bin folder (train: its five training
    batches), images N x 32 x 32 x 3 (the planes turned to H x W x C, as every CIFAR
    tutorial does)."""
    import numpy as np
    if kind == "mnist":
        prefix = "train" if split == "train" else "t10k"
        with gzip.open(f"{source}/{prefix}-images-idx3-ubyte.gz") as f:
            images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
        with gzip.open(f"{source}/{prefix}-labels-idx1-ubyte.gz") as f:
            labels = np.frombuffer(f.read(), np.uint8, offset=8)
        return images, labels, [str(d) for d in range(10)]
    files = [f"data_batch_{b}.bin" for b in range(1, 6)] if split == "train" else \
        ["test_batch.bin"]
    records = np.concatenate([np.fromfile(f"{source}/{name}", np.uint8)
                              for name in files]).reshape(-1, 1 + 3 * 32 * 32)
    images = records[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    with open(f"{source}/batches.meta.txt", encoding="utf-8") as f:
        names = [line.strip() for line in f if line.strip()]
    return np.ascontiguousarray(images), records[:, 0].copy(), names

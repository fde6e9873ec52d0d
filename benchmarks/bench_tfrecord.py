"""idx-to-tfrecord against the users' recipe, as whole processes in the same run (see
common.py for how each figure is taken):

1. The official 60000-image training set (.gz files, as both read them) to one TFRecord
   file: benchmarks/recipe_tfrecord.py (numpy, cv2.imencode, tf.train.Example,
   tf.io.TFRecordWriter) against `mnistconv idx-to-tfrecord --split train`. The two
   outputs must hold identical records (the recipe's after sorting its feature map, whose
   order TensorFlow leaves unspecified), or the timing means nothing.
   Targets: at least 8x faster than the recipe; 0.35 s or less; peak memory under 300 MB.
   mnistconv runs worker processes, and GNU time's "maximum resident set size" is that
   of the largest single process, so peak memory is also sampled here as the sum of the
   proportional set sizes (PSS: shared pages counted once) of the whole process tree,
   and the target applies to the larger of the two.
   A third command calibrates the machine: benchmarks/c_reference/idx_to_tfrecord.c, the
   same conversion in single-threaded C with libjpeg-turbo and zlib, compiled with gcc into
   the temporary work directory (skipped, with a line saying why, without gcc or the
   jpeglib.h and zlib.h headers). Its output must be byte-identical to mnistconv's. The
   issue set the 0.35 s target where that program took about 0.17 s, so the time target
   is checked as that multiple (2.06x) of the program's time in the same run; without
   the C reference, against 0.35 s itself. Issue 13 then asked for more: no longer than
   the C program itself (mnistconv has both cores, the C program one), checked too.
2. Start-up: what the imports each side needs cost (mnistconv's TFRecord modules and
   codecs against OpenCV and TensorFlow).
"""

import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time

import common
from common import mnistconv

RECIPE = common.BENCH_DIR / "recipe_tfrecord.py"
TARGET_RATIO = 8
TARGET_SECONDS = 0.35
TARGET_MB = 300
C_SOURCE = common.BENCH_DIR / "c_reference" / "idx_to_tfrecord.c"
C_NAME = "C program (libjpeg-turbo, 1 core)"
ISSUE_C_SECONDS = 0.17  # what the C program took on the machine the targets were set on


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree_pss_kb(root):
    """Sum of PSS over root and its descendants (Linux /proc), in KB."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total


def records(path):
    data, pos = path.read_bytes(), 0
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 8], "little")
        yield data[pos + 12:pos + 12 + n]
        pos += 16 + n


def same_records(recipe, ours):
    """A fast converter that writes something else is no result. The recipe serializes
    each Example's feature map in whatever order TensorFlow's protobuf gives (it varies
    between runs), so its records are compared after a deterministic re-serialization
    (map keys sorted, what mnistconv writes): they must then be byte-identical."""
    sys.path.insert(0, str(common.REPO))
    from mnistconv.codecs.example import example_class
    Example = example_class()
    count = 0
    for count, (a, b) in enumerate(zip(records(recipe), records(ours)), 1):
        if Example.FromString(a).SerializeToString(deterministic=True) != b:
            raise SystemExit(f"error: record {count - 1} differs from the recipe's")
    total = sum(1 for _ in records(recipe))
    if count != total or count != sum(1 for _ in records(ours)):
        raise SystemExit("error: the recipe and mnistconv wrote different record counts")
    same_file = sha256(recipe) == sha256(ours)
    print(f"  (all {count} records identical to the recipe's once its map order is sorted; "
          f"the files are {'also' if same_file else 'not'} byte-identical: the recipe's "
          f"own map order varies run to run)")


def tree_peak_mb(cmd):
    """Run cmd once, sampling the process tree's summed PSS every 10 ms; peak in MB."""
    proc = subprocess.Popen(cmd, cwd=common.REPO, env=common.env(), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]

    def sample():
        while proc.poll() is None:
            peak[0] = max(peak[0], _tree_pss_kb(proc.pid))
            time.sleep(0.01)
    sampler = threading.Thread(target=sample)
    sampler.start()
    _, err = proc.communicate()
    sampler.join()
    if proc.returncode:
        raise common.CommandFailed(f"{' '.join(map(str, cmd))}: {err.decode()[-2000:]}")
    return peak[0] * 1024 / common.MB


def build_c_reference(into):
    """Compile the C reference into `into` (the work directory, never the repository).
    Returns (executable, None), or (None, why it was skipped) when gcc or a header is
    missing; a compile error with both present is a failure of the bench."""
    gcc = shutil.which("gcc")
    if not gcc:
        return None, "gcc not found (Debian package gcc; `make bench` installs it)"
    for header, package in (("jpeglib.h", "libjpeg62-turbo-dev"), ("zlib.h", "zlib1g-dev")):
        # jpeglib.h uses size_t and FILE without including stdio.h itself.
        probe = subprocess.run([gcc, "-E", "-x", "c", "-", "-o", os.devnull],
                               input=f"#include <stdio.h>\n#include <{header}>\n",
                               capture_output=True, text=True)
        if probe.returncode:
            return None, (f"{header} not found (Debian package {package}; `make bench` "
                          "installs it)")
    exe = into / "idx_to_tfrecord"
    proc = subprocess.run([gcc, "-std=c99", "-O2", "-march=native", str(C_SOURCE), "-o",
                           str(exe), "-ljpeg", "-lz"], capture_output=True, text=True)
    if proc.returncode:
        raise common.CommandFailed(f"compiling {C_SOURCE.name} failed:\n"
                                   f"{proc.stderr[-2000:]}")
    return exe, None


def idx_to_tfrecord(gz, out_dir, targets):
    outputs = {"recipe (cv2 + tf.train.Example + TFRecordWriter)": out_dir / "recipe.tfrecord",
               "mnistconv idx-to-tfrecord": out_dir / "mnistconv.tfrecord"}
    recipe_name, ours_name = list(outputs)
    commands = {
        recipe_name: [common.PY, str(RECIPE), gz / "train-images-idx3-ubyte.gz",
                      gz / "train-labels-idx1-ubyte.gz", outputs[recipe_name]],
        ours_name: mnistconv("idx-to-tfrecord", gz, outputs[ours_name], "--split", "train",
                             "-q"),
    }
    c_exe, c_skipped = build_c_reference(out_dir)
    if c_exe:
        outputs[C_NAME] = out_dir / "c.tfrecord"
        commands[C_NAME] = [c_exe, gz, outputs[C_NAME]]
    commands = {k: list(map(str, v)) for k, v in commands.items()}
    # The recipe gets as many runs as mnistconv: its time moves by 2-3 s between runs
    # here (TensorFlow's import), and the ratio is the target.
    results = common.measure(commands, before=lambda name: common.remove(outputs[name]))
    common.print_table("idx-to-tfrecord, official training set (60000 images, .gz input)",
                       results, ours_name)
    same_records(outputs[recipe_name], outputs[ours_name])
    if c_exe and sha256(outputs[C_NAME]) != sha256(outputs[ours_name]):
        raise SystemExit(f"error: the C reference's output differs from mnistconv's "
                         f"({C_SOURCE.relative_to(common.REPO)})")

    common.remove(outputs[ours_name])
    tree_mb = tree_peak_mb(commands[ours_name])
    ours, recipe = results[ours_name], results[recipe_name]
    ratio = recipe.seconds / ours.seconds
    cpu_ratio = recipe.cpu_seconds / ours.cpu_seconds
    print(f"\n  recipe {recipe.seconds:.3f} s, mnistconv {ours.seconds:.3f} s: {ratio:.1f}x "
          f"faster (CPU time {recipe.cpu_seconds:.2f} s vs {ours.cpu_seconds:.2f} s, "
          f"{cpu_ratio:.1f}x)")
    print(f"  peak memory: recipe {recipe.peak_mb:.0f} MB; mnistconv {ours.peak_mb:.0f} MB "
          f"largest process (GNU time), {tree_mb:.0f} MB whole process tree (PSS sum)")
    if c_exe:
        c = results[C_NAME]
        factor = c.seconds / ISSUE_C_SECONDS
        compared = f"{factor:.1f}x slower" if factor >= 1 else f"{1 / factor:.1f}x faster"
        print(f"  C reference (libjpeg-turbo, one core): {c.seconds:.3f} s here (CPU "
              f"{c.cpu_seconds:.2f} s), output byte-identical to mnistconv's; the issue's "
              f"target {TARGET_SECONDS} s was set where it took about {ISSUE_C_SECONDS} s: "
              f"this machine runs it {compared}")
    else:
        print(f"  C reference skipped: {c_skipped}")
    targets.check(ratio >= TARGET_RATIO, f"{ratio:.1f}x faster than the recipe (target: at "
                                         f"least {TARGET_RATIO}x)")
    if c_exe:
        # The issue's 0.35 s was 2.1x the C program's 0.17 s on its machine; the same
        # multiple of the C program's time here is the target this machine can be held
        # to (the absolute figure is printed beside it).
        allowed = TARGET_SECONDS / ISSUE_C_SECONDS
        multiple = ours.seconds / results[C_NAME].seconds
        targets.check(multiple <= allowed,
                      f"{ours.seconds:.3f} s = {multiple:.2f}x the C reference's time (target: "
                      f"{TARGET_SECONDS} s where it took {ISSUE_C_SECONDS} s, i.e. at most "
                      f"{allowed:.2f}x it; in absolute terms {ours.seconds:.3f} s against "
                      f"{TARGET_SECONDS} s)")
        c_seconds = results[C_NAME].seconds
        targets.check(ours.seconds <= c_seconds,
                      f"{ours.seconds:.3f} s against the C reference's {c_seconds:.3f} s = "
                      f"{multiple:.2f}x (issue 13's target: no longer than it, 1.00x; CPU "
                      f"time {ours.cpu_seconds:.2f} s against {results[C_NAME].cpu_seconds:.2f} s)")
    else:
        targets.check(ours.seconds <= TARGET_SECONDS, f"{ours.seconds:.3f} s (target: "
                                                      f"{TARGET_SECONDS} s or less)")
    peak = max(ours.peak_mb, tree_mb)
    targets.check(peak < TARGET_MB, f"peak memory {peak:.0f} MB (target: under "
                                    f"{TARGET_MB} MB)")


def startup():
    py = common.PY
    results = common.measure({
        "mnistconv --help": mnistconv("--help"),
        "python -c 'import numpy'": [py, "-c", "import numpy"],
        # What idx-to-tfrecord's writer loads (no protobuf: it writes the Example wire
        # format itself; only reading TFRecord parses with protobuf).
        "import mnistconv's tfrecord writer deps": [
            py, "-c", "import numpy, PIL.Image, PIL.JpegImagePlugin, simplejpeg, "
                      "google_crc32c; from mnistconv.formats.tfrecord import writer"],
        "python -c 'import numpy, cv2'": [py, "-c", "import numpy, cv2"],
        "python -c 'import tensorflow'": [py, "-c", "import tensorflow"],
    }, repeat=max(common.REPEAT, 5), fewer={"python -c 'import tensorflow'": 3})
    common.print_table("Start-up (imports)", results, "mnistconv --help")


def main():
    common.require_gnu_time()
    gz = common.official_gz_dir()
    import importlib.util
    missing = [m for m in ("tensorflow", "cv2") if importlib.util.find_spec(m) is None]
    if missing:
        common.skip(f"the recipe needs {' and '.join(missing)}; pip install "
                    "'mnistconv[tensorflow,test]'")
    targets = common.Targets()
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores; median of "
          f"{common.REPEAT} runs after a warm-up, interleaved")
    with common.workdir() as tmp:
        idx_to_tfrecord(gz, tmp, targets)
        startup()
    targets.exit()


if __name__ == "__main__":
    common.run(main)

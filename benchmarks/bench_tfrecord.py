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
2. Start-up: what the imports each side needs cost (mnistconv's TFRecord modules and
   codecs against OpenCV and TensorFlow).
"""

import hashlib
import os
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
    from mnistconv.formats.example_proto import example_class
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
    commands = {k: list(map(str, v)) for k, v in commands.items()}
    results = common.measure(commands, before=lambda name: common.remove(outputs[name]),
                             fewer={recipe_name: 3})
    common.print_table("idx-to-tfrecord, official training set (60000 images, .gz input)",
                       results, ours_name)
    same_records(outputs[recipe_name], outputs[ours_name])

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
    targets.check(ratio >= TARGET_RATIO, f"{ratio:.1f}x faster than the recipe (target: at "
                                         f"least {TARGET_RATIO}x)")
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
        "import mnistconv's tfrecord writer deps": [
            py, "-c", "import numpy, PIL.Image, simplejpeg, google_crc32c; "
                      "from mnistconv.formats import tfrecord, example_proto; "
                      "example_proto.example_class()"],
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
          f"{common.REPEAT} runs after a warm-up (recipe: 3), interleaved")
    with common.workdir() as tmp:
        idx_to_tfrecord(gz, tmp, targets)
        startup()
    targets.exit()


if __name__ == "__main__":
    common.run(main)

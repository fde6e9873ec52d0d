"""The foundation's speed and memory against what users do today, as whole processes in
the same run (see common.py for how each figure is taken):

1. Reading the official training set: the np.fromfile recipe, python-mnist and idx2numpy
   against `mnistconv info <dir>` (which reads and checks both splits and hashes every
   file) and against the same read through mnistconv's library.
   Target: info at least 5x faster than python-mnist's load_training().
2. idx-to-npz on the official files against a ten-line numpy script (both reading the
   uncompressed files; mnistconv on the .gz files as an extra line).
   Targets: no slower than the script; peak memory under 3x the output array (47 MB).
3. Start-up: `mnistconv --help` against bare Python and `import numpy`.
"""

import sys

import numpy as np

import common
from common import mnistconv, python

X_TRAIN_BYTES = 60000 * 28 * 28  # the largest output array, x_train uint8


def reading(raw, gz, targets):
    results = common.measure({
        "mnistconv info DIR": mnistconv("info", raw),
        "mnistconv info DIR (.gz files)": mnistconv("info", gz),
        "mnistconv library read (train)": python("mnistconv_read.py", raw),
        "numpy np.fromfile(f)[16:]": python("numpy_fromfile.py", raw),
        "idx2numpy convert_from_file": python("idx2numpy_load.py", raw),
        "python-mnist load_training()": python("python_mnist_load.py", raw),
        "python-mnist load_training() gz=True": python("python_mnist_load.py", gz, "--gz"),
    }, fewer={"python-mnist load_training()": 3,
              "python-mnist load_training() gz=True": 1})
    common.print_table("Reading the official training set (uncompressed unless noted)",
                       results, "mnistconv info DIR")
    ratio = results["python-mnist load_training()"].seconds / \
        results["mnistconv info DIR"].seconds
    targets.check(ratio >= 5, f"info is {ratio:.1f}x faster than python-mnist "
                              "load_training() (target: at least 5x)")


def idx_to_npz(raw, gz, out_dir, targets):
    outputs = {
        "mnistconv idx-to-npz DIR out.npz": out_dir / "mnistconv.npz",
        "mnistconv idx-to-npz DIR (.gz files)": out_dir / "mnistconv-gz.npz",
        "numpy script (np.fromfile + np.savez)": out_dir / "numpy.npz",
        "numpy script, then SHA-256 of its output": out_dir / "numpy-sha.npz",
    }
    commands = {
        "mnistconv idx-to-npz DIR out.npz": mnistconv("idx-to-npz", raw,
                                                      outputs["mnistconv idx-to-npz DIR out.npz"]),
        "mnistconv idx-to-npz DIR (.gz files)": mnistconv(
            "idx-to-npz", gz, outputs["mnistconv idx-to-npz DIR (.gz files)"]),
        "numpy script (np.fromfile + np.savez)": python(
            "numpy_idx_to_npz.py", raw, outputs["numpy script (np.fromfile + np.savez)"]),
        # Like for like: mnistconv reports every output's SHA-256; the script does not.
        "numpy script, then SHA-256 of its output": python(
            "numpy_idx_to_npz.py", raw, outputs["numpy script, then SHA-256 of its output"],
            "--sha256"),
    }
    # Close to the script by design (same zipfile work underneath), so more runs: a
    # median of 9 moves less with the machine's other work.
    results = common.measure(commands, repeat=max(common.REPEAT, 9),
                             before=lambda name: common.remove(outputs[name]))
    common.print_table("idx-to-npz on the official files (train + test)", results,
                       "mnistconv idx-to-npz DIR out.npz")
    _same_arrays(outputs)

    ours = results["mnistconv idx-to-npz DIR out.npz"]
    script = results["numpy script (np.fromfile + np.savez)"]
    targets.check(ours.seconds <= script.seconds,
                  f"idx-to-npz {ours.seconds:.3f} s vs the numpy script {script.seconds:.3f} s "
                  f"({script.seconds / ours.seconds:.2f}x; target: no slower)")
    peak = ours.peak_kb * 1024
    targets.check(peak < 3 * X_TRAIN_BYTES,
                  f"idx-to-npz peak memory {peak / common.MB:.1f} MB = "
                  f"{peak / X_TRAIN_BYTES:.2f}x the output array x_train "
                  f"({X_TRAIN_BYTES / common.MB:.1f} MB) (target: under 3x); the numpy "
                  f"script: {script.peak_mb:.1f} MB = {script.peak_kb * 1024 / X_TRAIN_BYTES:.2f}x")


def _same_arrays(outputs):
    """A fast converter that writes the wrong thing is no result: every output must hold
    the numpy script's arrays (keys, dtypes, shapes, values)."""
    reference = outputs["numpy script (np.fromfile + np.savez)"]
    with np.load(reference) as want:
        for name, path in outputs.items():
            with np.load(path) as got:
                if sorted(got.files) != sorted(want.files) or any(
                        got[k].dtype != want[k].dtype or got[k].shape != want[k].shape
                        or not np.array_equal(got[k], want[k]) for k in want.files):
                    raise SystemExit(f"error: {name} wrote arrays that differ from the "
                                     f"numpy script's ({path})")
    print("  (all outputs hold identical arrays: x_train, y_train, x_test, y_test)")


def startup():
    results = common.measure({
        "mnistconv --help": mnistconv("--help"),
        "python -c pass": [common.PY, "-c", "pass"],
        "python -c 'import numpy'": [common.PY, "-c", "import numpy"],
        "python -c 'import click'": [common.PY, "-c", "import click"],
        "python -c 'import mnistconv.cli'": [common.PY, "-c", "import mnistconv.cli"],
    }, repeat=max(common.REPEAT, 9))
    common.print_table("Start-up", results, "mnistconv --help")


def main():
    common.require_gnu_time()
    gz = common.official_gz_dir()
    targets = common.Targets()
    print(f"Python {sys.version.split()[0]}, numpy {np.__version__}; median of "
          f"{common.REPEAT} runs after a warm-up, interleaved (BENCH_REPEAT changes it)")
    with common.workdir() as tmp:
        raw = common.decompressed_copy(tmp / "mnist")
        (tmp / "out").mkdir()
        reading(raw, gz, targets)
        idx_to_npz(raw, gz, tmp / "out", targets)
        startup()
    targets.exit()


if __name__ == "__main__":
    common.run(main)

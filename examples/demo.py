"""`make demo`: convert the bundled MNIST sample into every format mnistconv writes,
printing each command and what it wrote. Needs no network and no TensorFlow.

    python examples/demo.py [OUT_DIR]
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SAMPLE = Path(os.path.relpath(HERE / "data" / "mnist-sample"))


def mnistconv(*args):
    command = ["mnistconv", *map(str, args)]
    print(f"\n$ {shlex.join(command)}", flush=True)
    # Run the installed package the same way the console script does.
    result = subprocess.run([sys.executable, "-m", "mnistconv", *map(str, args)])
    if result.returncode != 0:
        sys.exit(f"demo: `{shlex.join(command)}` failed with exit code {result.returncode}")


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "demo-out")
    if out.exists():
        shutil.rmtree(out)  # the demo's own output folder: start clean every time
    out.mkdir(parents=True)
    os.environ.setdefault("COLUMNS", "100")
    print(f"The bundled sample: {SAMPLE} "
          "(the first 1000 training and 200 test images of MNIST)")
    mnistconv("info", SAMPLE)
    mnistconv("idx-to-npz", SAMPLE, out / "mnist-sample.npz")
    mnistconv("npz-to-idx", out / "mnist-sample.npz", out / "idx", "--gzip")
    mnistconv("idx-to-tfrecord", SAMPLE, out / "mnist-sample.tfrecord")
    mnistconv("idx-to-tfrecord", SAMPLE, out / "tfds" / "mnist.tfrecord", "--preset", "tfds",
              "--split", "train", "--shards", "2")
    mnistconv("idx-to-gdmnist", SAMPLE, out / "browser", "--per-class", "10")
    mnistconv("compare", SAMPLE, out / "mnist-sample-train.tfrecord", "--split", "train",
              "--tolerance", "255")
    mnistconv("show", SAMPLE, "--split", "test", "--index", "0:8")
    print(f"\nAll outputs are in {out}/:")
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        print(f"  {path.relative_to(out)}  {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()

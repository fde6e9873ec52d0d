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
    mnistconv("idx-to-tfds", SAMPLE, out / "tfds_data")
    mnistconv("idx-to-arrayrecord", SAMPLE, out / "mnist-sample.array_record")
    mnistconv("idx-to-parquet", SAMPLE, out / "hf", "--config", "mnist")
    mnistconv("idx-to-webdataset", SAMPLE, out / "shards" / "mnist.tar", "--shard-size", "500")
    mnistconv("idx-to-imagefolder", SAMPLE, out / "images", "--split", "test")
    mnistconv("idx-to-caffe-lmdb", SAMPLE, out / "caffe")
    mnistconv("idx-to-caffe-hdf5", SAMPLE, out / "caffe-h5")
    mnistconv("compare", SAMPLE, out / "mnist-sample-train.tfrecord", "--split", "train",
              "--tolerance", "255")
    mnistconv("show", SAMPLE, "--split", "test", "--index", "0:8")
    print(f"\nAll outputs are in {out}/:")
    files = sorted(p for p in out.rglob("*") if p.is_file())
    for top in sorted({p.relative_to(out).parts[0] for p in files}):
        inside = [p for p in files if p.relative_to(out).parts[0] == top]
        if len(inside) > 12:  # an ImageFolder tree: one line, not one per image
            size = sum(p.stat().st_size for p in inside)
            print(f"  {top}/  {len(inside):,} files, {size:,} bytes")
            continue
        for path in inside:
            print(f"  {path.relative_to(out)}  {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()

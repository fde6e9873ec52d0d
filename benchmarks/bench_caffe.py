"""Caffe's LMDB of the official training set: mnistconv against what Caffe's
convert_mnist_data does, written in Python, as whole processes (see common.py for how
each figure is taken):

  mnistconv idx-to-caffe-lmdb DIR OUT --split train
  python baselines/caffe_convert_mnist_data.py IMAGES LABELS OUT
      convert_mnist_data.cpp step for step: per item read its pixels and label byte,
      set them on one caffe.Datum (a protobuf message class built from caffe.proto's
      Datum), txn.put(b"%08d" % i, datum.SerializeToString()), a commit every 1000
      puts, the LMDB opened as the tool opens it (an fsync per commit), 1 TB map

DIR holds the official files decompressed (the tool reads raw IDX). Both LMDBs are
then read back with `lmdb` and must hold the same keys and the same value bytes. Also
timed, not targeted: caffe-hdf5 of the same set (float32 [0, 1]).

Target: mnistconv at least 5x faster than the baseline (wall time, the median). Where
the time goes (2-core VM, cProfile and /usr/bin/time): mnistconv's command is about
0.19 s of CPU, of which 0.13 s is starting Python and importing numpy, click and
mnistconv, 0.03 s hashing the 49 MB output (the SHA-256 every writer reports) and the
rest reading the IDX and putting the Datums through liblmdb (a hand-written page
writer, removed in issue 25, saved 43 ms of CPU: under 5% of the command). The
baseline is about 0.24 s of CPU (protobuf's upb serializer and liblmdb are C; it
imports no numpy) plus waiting for its 60 fsyncs. So the ratio is the baseline's
fsync time over a start-up-bound mnistconv: 5x needs fsyncs that cost about 1 s in
all (a spinning disk, a busy one); on a fast disk it is out of reach and is reported
as MISSED with the figures.
"""

import common
from common import mnistconv, python


def same_records(a, b):
    import lmdb
    envs = [lmdb.open(str(p), readonly=True, lock=False) for p in (a, b)]
    try:
        with envs[0].begin() as ta, envs[1].begin() as tb:
            left, right = ta.cursor(), tb.cursor()
            count = 0
            for pair in zip(left, right):
                if pair[0] != pair[1]:
                    return False, count
                count += 1
            return ta.stat()["entries"] == tb.stat()["entries"] == count, count
    finally:
        for env in envs:
            env.close()


def main():
    common.require_gnu_time()
    try:
        import lmdb  # noqa: F401
        import google.protobuf  # noqa: F401
    except ImportError as e:
        common.skip(f"{e.name} is not installed (pip install 'mnistconv[test-caffe]')")
    targets = common.Targets()
    with common.workdir() as work:
        raw = common.decompressed_copy(work / "raw")
        outs = {"mnistconv caffe-lmdb": work / "ours",
                "python convert_mnist_data": work / "baseline",
                "mnistconv caffe-hdf5": work / "h5"}
        commands = {
            "mnistconv caffe-lmdb": mnistconv("idx-to-caffe-lmdb", raw, outs["mnistconv caffe-lmdb"],
                                              "--split", "train", "-q"),
            "python convert_mnist_data": python(
                "caffe_convert_mnist_data.py", raw / "train-images-idx3-ubyte",
                raw / "train-labels-idx1-ubyte", outs["python convert_mnist_data"]),
            "mnistconv caffe-hdf5": mnistconv("idx-to-caffe-hdf5", raw, outs["mnistconv caffe-hdf5"],
                                              "--split", "train", "-q"),
        }
        results = common.measure(commands, before=lambda name: common.remove(outs[name]))
        common.print_table("The official training set (60000 images) to Caffe's LMDB "
                           "(ratios against mnistconv caffe-lmdb)", results,
                           "mnistconv caffe-lmdb")
        ours, theirs = results["mnistconv caffe-lmdb"], results["python convert_mnist_data"]
        ratio = theirs.seconds / ours.seconds
        cpu_ratio = theirs.cpu_seconds / ours.cpu_seconds
        same, count = same_records(outs["mnistconv caffe-lmdb"] / "train_lmdb",
                                   outs["python convert_mnist_data"])
        targets.check(same and count == 60000, f"the same {count} keys and Datum bytes as "
                                               "the baseline's LMDB")
        targets.check(ratio >= 5, f"LMDB writing {ours.seconds:.2f} s against "
                                  f"{theirs.seconds:.2f} s: {ratio:.2f}x faster (CPU "
                                  f"{cpu_ratio:.2f}x; target: at least 5x)")
    targets.exit()


if __name__ == "__main__":
    common.run(main)

"""idx-to-webdataset against webdataset.TarWriter, as whole processes in the same run
(see common.py for how each figure is taken).

The official 60000-image training set (.gz files, as both read them) to one tar shard:
benchmarks/baselines/webdataset_tarwriter.py (numpy, webdataset.TarWriter fed one
sample at a time, its own PNG encoder) against `mnistconv idx-to-webdataset --split
train` (every core). The baseline is given mnistconv's header settings (mtime 0, mode
0644, empty user and group) and the same .json, so the two tars must hold the same
members in the same order with the same bytes, but for the PNGs (Pillow's adaptive
filters against mnistconv's unfiltered ones), which must decode to the same pixels; or
the timing means nothing.
Targets (issue 15): at least 5x faster than the baseline; mnistconv's peak memory under
200 MB (its forked workers counted as the sum of the process tree's PSS too, as
bench_tfrecord does). The baseline's peak is printed, not held to it: tarfile keeps a
TarInfo for every member it writes (about 870 MB for these 180000).
"""

import common
from common import mnistconv

TARGET_RATIO = 5
TARGET_MB = 200


def members(tars):
    """(tar, member) of every member of the tars, in order."""
    import tarfile
    for path in tars:
        with tarfile.open(path, "r|") as tar:
            for member in tar:
                yield tar, member


def same_samples(baseline, ours, samples=60000):
    """The baseline tar and our shards, in order, hold the same member names and bytes,
    PNGs the same pixels."""
    import io

    import numpy as np
    from PIL import Image
    count = 0
    for (a, x), (b, y) in zip(members([baseline]), members(ours)):
        if x.name != y.name:
            raise SystemExit(f"error: member {count}: {x.name} against {y.name}")
        dx, dy = a.extractfile(x).read(), b.extractfile(y).read()
        if x.name.endswith(".png"):
            same = np.array_equal(np.asarray(Image.open(io.BytesIO(dx))),
                                  np.asarray(Image.open(io.BytesIO(dy))))
        else:
            same = dx == dy
        if not same:
            raise SystemExit(f"error: member {x.name} differs")
        count += 1
    if count != 3 * samples:
        raise SystemExit(f"error: {count} members, expected {3 * samples}")


def main():
    gz, targets = common.start("the baseline", ["webdataset"], "mnistconv[test-pytorch]")
    from bench_tfrecord import tree_peak_mb
    with common.workdir() as tmp:
        base_out = tmp / "baseline.tar"
        ours_dir = tmp / "ours"
        base_name = "webdataset.TarWriter, one sample at a time"
        ours_name = "mnistconv idx-to-webdataset"
        commands = {
            base_name: common.python("webdataset_tarwriter.py", gz, base_out),
            ours_name: mnistconv("idx-to-webdataset", gz, ours_dir / "mnist.tar", "--split",
                                 "train", "-q"),
        }
        outputs = {base_name: base_out, ours_name: ours_dir}
        # The baseline takes tens of seconds a run and moves little between runs.
        results = common.measure(commands, before=lambda n: common.remove(outputs[n]),
                                 fewer={base_name: min(3, common.REPEAT)})
        common.print_table("idx-to-webdataset, official training set (60000 images, "
                           ".gz input, default shard size)", results, ours_name)
        same_samples(base_out, sorted(ours_dir.glob("mnist-train-*.tar")))
        common.remove(ours_dir)
        tree_mb = tree_peak_mb(commands[ours_name])
        ours, base = results[ours_name], results[base_name]
        ratio = base.seconds / ours.seconds
        print(f"\n  baseline {base.seconds:.2f} s, mnistconv {ours.seconds:.2f} s: "
              f"{ratio:.1f}x faster (CPU time {base.cpu_seconds:.2f} s vs "
              f"{ours.cpu_seconds:.2f} s, {base.cpu_seconds / ours.cpu_seconds:.1f}x); the "
              f"tars hold the same 180000 members (PNGs: the same pixels)")
        print(f"  peak memory: baseline {base.peak_mb:.0f} MB; mnistconv {ours.peak_mb:.0f} "
              f"MB largest process (GNU time), {tree_mb:.0f} MB whole process tree (PSS)")
        targets.check(ratio >= TARGET_RATIO, f"{ratio:.1f}x faster than webdataset.TarWriter "
                                             f"(target: at least {TARGET_RATIO}x)")
        targets.check(max(ours.peak_mb, tree_mb) < TARGET_MB,
                      f"mnistconv peak {max(ours.peak_mb, tree_mb):.0f} MB (target: under "
                      f"{TARGET_MB} MB)")
    targets.exit()


if __name__ == "__main__":
    common.run(main)

"""CIFAR-10's training set (50,000 x 32 x 32 x 3) to TFRecord, TFDS, Parquet and
WebDataset against the baselines MNIST's benches use, each ratio held to MNIST's own
ratio measured in the same run (issue 37), as whole processes (see common.py for how
each figure is taken).

The CIFAR-10 files are generated (no network here): common.write_cifar10_bin lays out a
cifar-10-batches-bin folder as the publisher does (data_batch_1..5.bin, test_batch.bin,
batches.meta.txt), its images common.smooth_noise_images (a smooth field plus noise: a
PNG of one is about the size of a real CIFAR image's, but it is no photograph). mnistconv
reads the folder with its CIFAR reader (`convert DIR OUT --to FORMAT --split train`);
each baseline reads the same bytes with numpy (common.load_arrays) and runs the very
code it runs for MNIST:

  TFRecord    recipe_tfrecord.py (cv2 + tf.train.Example + TFRecordWriter; MNIST as
              JPEG, CIFAR as PNG, which is what mnistconv's TFRecord holds RGB in:
              --image-format png) against idx-to-tfrecord / --to tfrecord
  TFDS        baselines/tfds_store_as_tfds_dataset.py (TFDS' store_as_tfds_dataset)
              against idx-to-tfds / --to tfds (MNIST: training and test sets, as
              bench_tfds.py runs it)
  Parquet     baselines/hf_datasets_to_parquet.py (datasets' from_dict, cast_column,
              to_parquet) against --to parquet
  WebDataset  baselines/webdataset_tarwriter.py (webdataset.TarWriter) against
              idx-to-webdataset / --to webdataset

For each format the four commands (MNIST's two, CIFAR's two) are interleaved in one
measure() call, so both ratios (baseline time / mnistconv time) see the same load.
Each pair's outputs must hold the same records, checked the way the MNIST benches check
theirs (for CIFAR's TFRecord: the same decoded pixels and one-hot labels, cv2's PNG bytes
not being mnistconv's), or the timing means nothing. A format whose mnistconv writer
refuses RGB is reported with its one-line refusal, not measured. Target, for each
format: CIFAR's ratio at least 80% of MNIST's (within 20% of it; a larger ratio is not
held against it).

    BENCH_CIFAR_TRAIN=5000 BENCH_CIFAR_FORMATS=parquet python benchmarks/bench_cifar.py
    BENCH_CIFAR_REPEAT=2 BENCH_CIFAR_BASELINE_RUNS=1 ...   # fewer runs
"""

import io
import os
import sys

import common
from common import mnistconv

TRAIN = int(os.environ.get("BENCH_CIFAR_TRAIN", "50000"))
FORMATS = os.environ.get("BENCH_CIFAR_FORMATS", "tfrecord,tfds,parquet,webdataset").split(",")
REPEAT = int(os.environ.get("BENCH_CIFAR_REPEAT", str(min(common.REPEAT, 3))))
# Each baseline run costs tens of seconds, minutes on a loaded machine.
BASELINE_RUNS = min(int(os.environ.get("BENCH_CIFAR_BASELINE_RUNS", "2")), REPEAT)
WITHIN = 0.2


class Pair:
    """One format: MNIST's and CIFAR's baseline and mnistconv commands, their outputs,
    and the checks that each pair wrote the same records."""

    def __init__(self, title, commands, outputs, check_mnist, check_cifar):
        self.title, self.commands, self.outputs = title, commands, outputs
        self.check_mnist, self.check_cifar = check_mnist, check_cifar


def same_png_records(recipe, ours):
    """Every record of the two TFRecord files holds the same decoded image and the same
    one-hot label (mnistconv adds label_name: CIFAR's names file gives it the names)."""
    import numpy as np
    from PIL import Image

    from bench_tfrecord import records
    from mnistconv.codecs.example import example_class
    example = example_class()
    count = 0
    for count, (a, b) in enumerate(zip(records(recipe), records(ours)), 1):
        a, b = (example.FromString(r).features.feature for r in (a, b))
        pixels = [np.asarray(Image.open(io.BytesIO(f["image"].bytes_list.value[0])))
                  for f in (a, b)]
        if not np.array_equal(*pixels) or \
                list(a["label"].int64_list.value) != list(b["label"].int64_list.value):
            raise SystemExit(f"error: TFRecord record {count - 1} differs from the recipe's")
    if count != TRAIN or sum(1 for _ in records(ours)) != TRAIN:
        raise SystemExit(f"error: TFRecord: {count} records compared, expected {TRAIN}")


def pairs(gz, cifar, tmp):
    from bench_parquet import same_rows
    from bench_tfds import tfds_records
    from bench_tfrecord import RECIPE, same_records
    from bench_webdataset import same_samples

    def out(fmt, *names):
        return {name: tmp / f"{fmt}-{name}" for name in names}

    def same_tfds(a, b):
        if tfds_records(a) != tfds_records(b):
            raise SystemExit(f"error: the TFDS directories {a.parent.parent.name} and "
                             f"{b.parent.parent.name} hold different Examples")

    o = {k: v.with_suffix(".tfrecord") for k, v in out("tfrecord", "mb", "mo", "cb", "co").items()}
    yield "tfrecord", Pair("TFRecord", {
        "MNIST recipe (cv2 JPEG + tf.train.Example)": [
            common.PY, RECIPE, gz / "train-images-idx3-ubyte.gz",
            gz / "train-labels-idx1-ubyte.gz", o["mb"]],
        "MNIST mnistconv idx-to-tfrecord": mnistconv(
            "idx-to-tfrecord", gz, o["mo"], "--split", "train", "-q"),
        "CIFAR-10 recipe (cv2 PNG + tf.train.Example)": [
            common.PY, RECIPE, "--cifar10", cifar, o["cb"]],
        "CIFAR-10 mnistconv --to tfrecord --image-format png": mnistconv(
            "convert", cifar, o["co"], "--to", "tfrecord", "--image-format", "png",
            "--split", "train", "-q")}, list(o.values()),
        lambda: same_records(o["mb"], o["mo"]), lambda: same_png_records(o["cb"], o["co"]))

    o = out("tfds", "mb", "mo", "cb", "co")
    yield "tfds", Pair("TFDS directory", {
        "MNIST TFDS store_as_tfds_dataset (train + test)": common.python(
            "tfds_store_as_tfds_dataset.py", gz, o["mb"], "mnist", "mnist", "train", "test"),
        "MNIST mnistconv idx-to-tfds (train + test)": mnistconv("idx-to-tfds", gz, o["mo"],
                                                                "-q"),
        "CIFAR-10 TFDS store_as_tfds_dataset": common.python(
            "tfds_store_as_tfds_dataset.py", cifar, o["cb"], "cifar10", "cifar10", "train"),
        "CIFAR-10 mnistconv --to tfds": mnistconv(
            "convert", cifar, o["co"], "--to", "tfds", "--split", "train", "--name",
            "cifar10", "--version", "1.0.0", "-q")}, list(o.values()),
        lambda: same_tfds(o["mb"] / "mnist/1.0.0", o["mo"] / "mnist/1.0.0"),
        lambda: same_tfds(o["cb"] / "cifar10/1.0.0", o["co"] / "cifar10/1.0.0"))

    o = out("parquet", "mb", "mo", "cb", "co")
    o["mb"], o["cb"] = (o[k].with_suffix(".parquet") for k in ("mb", "cb"))
    yield "parquet", Pair("Hugging Face Parquet", {
        "MNIST datasets recipe (from_dict + cast_column + to_parquet)": common.python(
            "hf_datasets_to_parquet.py", gz, o["mb"]),
        "MNIST mnistconv --to parquet": mnistconv(
            "convert", gz, o["mo"], "--to", "parquet", "--split", "train", "-q"),
        "CIFAR-10 datasets recipe (from_dict + cast_column + to_parquet)": common.python(
            "hf_datasets_to_parquet.py", cifar, o["cb"], "cifar10"),
        "CIFAR-10 mnistconv --to parquet": mnistconv(
            "convert", cifar, o["co"], "--to", "parquet", "--split", "train", "-q")},
        list(o.values()), lambda: same_rows(o["mb"], o["mo"]),
        lambda: same_rows(o["cb"], o["co"]))

    o = out("webdataset", "mb", "mo", "cb", "co")
    o["mb"], o["cb"] = (o[k].with_suffix(".tar") for k in ("mb", "cb"))
    yield "webdataset", Pair("WebDataset", {
        "MNIST webdataset.TarWriter": common.python("webdataset_tarwriter.py", gz, o["mb"]),
        "MNIST mnistconv idx-to-webdataset": mnistconv(
            "idx-to-webdataset", gz, o["mo"] / "mnist.tar", "--split", "train", "-q"),
        "CIFAR-10 webdataset.TarWriter": common.python("webdataset_tarwriter.py", cifar,
                                                       o["cb"], "cifar10"),
        "CIFAR-10 mnistconv --to webdataset": mnistconv(
            "convert", cifar, o["co"] / "cifar.tar", "--to", "webdataset", "--split",
            "train", "-q")}, list(o.values()),
        lambda: same_samples(o["mb"], sorted(o["mo"].glob("mnist-train-*.tar"))),
        lambda: same_samples(o["cb"], sorted(o["co"].glob("cifar-train-*.tar")), TRAIN))


def refusal(cmd, tmp):
    """mnistconv's one-line refusal when its writer cannot hold CIFAR's images (tried on
    ten images), else None."""
    probe = tmp / "probe"
    common.remove(probe)
    at = cmd.index("convert") + 2
    try:
        common.run_once(cmd[:at] + [str(probe / os.path.basename(cmd[at]))] + cmd[at + 1:]
                        + ["--limit", "10"])
    except common.CommandFailed as e:
        return str(e).splitlines()[-1]
    finally:
        common.remove(probe)
    return None


def main():
    common.require_gnu_time()
    gz = common.official_gz_dir()
    import importlib.util
    needs = ["tensorflow", "cv2", "tensorflow_datasets", "datasets", "pyarrow", "webdataset"]
    missing = [m for m in needs if importlib.util.find_spec(m) is None]
    if missing:
        common.skip(f"the baselines need {' and '.join(missing)}; pip install 'mnistconv["
                    "tensorflow,test,test-tfds,parquet,test-parquet,test-pytorch]'")
    targets = common.Targets()
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} cores; median of {REPEAT} "
          f"runs of each mnistconv command and {BASELINE_RUNS} of each baseline after a "
          f"warm-up, interleaved; CIFAR-10 training set {TRAIN:,} x 32 x 32 x 3, generated")
    sys.path.insert(0, str(common.REPO))
    with common.workdir() as tmp:
        cifar = common.write_cifar10_bin(tmp / "cifar-10-batches-bin", TRAIN, TRAIN // 5)
        os.environ["HF_DATASETS_CACHE"] = str(tmp / "hf-cache")
        os.environ["HF_HUB_OFFLINE"] = "1"
        summary = []
        for fmt, pair in pairs(gz, cifar, tmp):
            if fmt not in FORMATS:
                continue
            names = list(pair.commands)
            commands = {k: list(map(str, v)) for k, v in pair.commands.items()}
            refused = refusal(commands[names[3]], tmp)
            if refused:
                print(f"\n{pair.title}: not measured, mnistconv refuses CIFAR-10's images:"
                      f"\n  {refused}")
                summary.append([pair.title, "", "", "", "mnistconv refuses RGB"])
                targets.check(False, f"{pair.title}: mnistconv's writer refuses CIFAR-10's "
                                     f"32 x 32 RGB images ({refused})")
                continue
            outputs = dict(zip(names, pair.outputs))
            results = common.measure(commands, repeat=REPEAT,
                                     before=lambda name: common.remove(outputs[name]),
                                     fewer={names[0]: BASELINE_RUNS,
                                            names[2]: BASELINE_RUNS})
            for label, (base, ours) in (("MNIST (official training set, 60000 x 28 x 28)",
                                         names[:2]),
                                        (f"CIFAR-10 (generated training set, {TRAIN:,} x "
                                         "32 x 32 x 3)", names[2:])):
                common.print_table(f"{pair.title}, {label}",
                                   {base: results[base], ours: results[ours]}, ours)
            pair.check_mnist()
            pair.check_cifar()
            ratio = {kind: results[base].seconds / results[ours].seconds
                     for kind, base, ours in (("mnist", *names[:2]), ("cifar", *names[2:]))}
            cpu = {kind: results[base].cpu_seconds / results[ours].cpu_seconds
                   for kind, base, ours in (("mnist", *names[:2]), ("cifar", *names[2:]))}
            share = ratio["cifar"] / ratio["mnist"]
            print(f"\n  {pair.title}: CIFAR-10 {ratio['cifar']:.1f}x faster than its "
                  f"baseline, MNIST {ratio['mnist']:.1f}x in the same runs: {share:.2f} of "
                  f"MNIST's ratio (CPU time: {cpu['cifar']:.1f}x and {cpu['mnist']:.1f}x); "
                  "each pair wrote the same records")
            summary.append([pair.title, f"{ratio['mnist']:.1f}x", f"{ratio['cifar']:.1f}x",
                            f"{share:.2f}", f"{cpu['mnist']:.1f}x / {cpu['cifar']:.1f}x"])
            targets.check(share >= 1 - WITHIN,
                          f"{pair.title}: CIFAR-10 {ratio['cifar']:.1f}x its baseline, "
                          f"MNIST {ratio['mnist']:.1f}x in the same run, {share:.2f} of it "
                          f"(target: within {WITHIN:.0%} of MNIST's ratio, at least "
                          f"{(1 - WITHIN) * ratio['mnist']:.1f}x)")
        columns = ["format", "MNIST ratio", "CIFAR-10 ratio", "CIFAR / MNIST",
                   "CPU ratios (MNIST / CIFAR)"]
        print("\nSummary (ratio = baseline wall time / mnistconv wall time, same run):")
        for row in summary:
            print("  " + " | ".join(row))
        load = os.getloadavg()
        common.record("table", title=f"CIFAR-10 ({TRAIN:,} images) against MNIST, ratios "
                                     f"from the same runs (load average {load[0]:.1f} at "
                                     "the end)", columns=columns, rows=summary)
    targets.exit()


if __name__ == "__main__":
    common.run(main)

"""Writing a TFDS prepared directory and ArrayRecord files against the tools users have
today, as whole processes in the same run (see common.py for how each figure is taken).

TFDS: the official training and test sets (70000 images) from the same numpy arrays.
The baseline (baselines/tfds_store_as_tfds_dataset.py) is TFDS' own API for data
already in memory, tfds.dataset_builders.store_as_tfds_dataset, with the FeaturesDict
TFDS' mnist builder declares (Image (28, 28, 1), ClassLabel of 10 names), everything else
at its defaults;
mnistconv: `mnistconv idx-to-tfds`. Both directories must hold the same serialized
Examples, byte for byte (TFDS shuffles their order by default: they are compared as
sorted lists), or the timing means nothing. An Example's features are a protobuf map,
whose entries TFDS' protobuf writes in an order of its own (upb, protobuf 6 and
later: label before image; mnistconv writes protobuf's deterministic order, by key): so
each Example is compared as its map entries in key order, each entry (the PNG bytes,
the label) byte for byte. Targets: at least 30x faster, peak memory under 200 MB.

ArrayRecord: the same 70000 examples as two .array_record files of the same Examples.
The baseline is a plain script a user writes: numpy arrays, Pillow PNGs,
tf.train.Example, array_record's ArrayRecordWriter (group_size:1); mnistconv:
`mnistconv idx-to-arrayrecord`. Reported with its ratio; target: peak memory under
200 MB.
"""

import os
import sys

import common
from common import mnistconv

TARGET_RATIO = 30
TARGET_PEAK_MB = 200
LOAD = r'''
import gzip, sys
import numpy as np

def load(folder):
    def read(name, offset):
        with gzip.open(f"{folder}/{name}.gz") as f:
            return np.frombuffer(f.read(), np.uint8, offset=offset)
    return {"train": (read("train-images-idx3-ubyte", 16).reshape(-1, 28, 28, 1),
                      read("train-labels-idx1-ubyte", 8)),
            "test": (read("t10k-images-idx3-ubyte", 16).reshape(-1, 28, 28, 1),
                     read("t10k-labels-idx1-ubyte", 8))}
'''
ARRAY_RECORD_SCRIPT = LOAD + r'''
import io
from PIL import Image
import tensorflow as tf
from array_record.python.array_record_module import ArrayRecordWriter

src, out = sys.argv[1:3]
for split, (x, y) in load(src).items():
    writer = ArrayRecordWriter(f"{out}/{split}.array_record", "group_size:1")
    for image, label in zip(x, y):
        png = io.BytesIO()
        Image.fromarray(image[:, :, 0], "L").save(png, "PNG")
        example = tf.train.Example(features=tf.train.Features(feature={
            "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[png.getvalue()])),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))}))
        writer.write(example.SerializeToString())
    writer.close()
'''


def _varint(data, at):
    """(value, next offset) of the protobuf varint at data[at]."""
    value = shift = 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return value, at
        shift += 7


def map_entries_sorted(record):
    """A serialized Example with its Features map entries in key order (each entry's
    bytes kept): Example {features (field 1) {feature (field 1, repeated): entry}}."""
    assert record[0] == 0x0A, "not an Example's features field"
    size, at = _varint(record, 1)
    assert at + size == len(record), "an Example holds its features field only"
    entries = []
    while at < len(record):
        assert record[at] == 0x0A, "not a Features map entry"
        size, start = _varint(record, at + 1)
        entries.append(record[at:start + size])
        at = start + size
    return b"".join(sorted(entries))


def tfds_records(version_dir):
    """Every serialized Example of a TFDS directory's TFRecord shards (map entries in
    key order), sorted."""
    sys.path.insert(0, str(common.REPO))
    from mnistconv.codecs.framing import iter_records
    records = []
    for name in sorted(os.listdir(version_dir)):
        if ".tfrecord-" in name:
            records += [map_entries_sorted(bytes(d))
                        for _, _, d in iter_records(str(version_dir / name))]
    return sorted(records)


def array_records(folder):
    """Every record of the .array_record files in folder, sorted."""
    from array_record.python.array_record_module import ArrayRecordReader
    records = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".array_record"):
            reader = ArrayRecordReader(str(folder / name))
            records += reader.read_all()
            reader.close()
    return sorted(records)


def main():
    gz, targets = common.start("the baselines",
                               ["tensorflow_datasets", "array_record", "tensorflow"],
                               "mnistconv[test-tfds,arrayrecord,tensorflow]",
                               " (TFDS' API: 1)")
    with common.workdir() as tmp:
        (tmp / "ar_script.py").write_text(ARRAY_RECORD_SCRIPT)
        out = {"tfds": tmp / "tfds_out", "ours": tmp / "ours_out",
               "ar": tmp / "ar_out", "ours_ar": tmp / "ours_ar"}
        base, ours = "TFDS store_as_tfds_dataset", "mnistconv idx-to-tfds"
        results = common.measure(
            {base: common.python("tfds_store_as_tfds_dataset.py", gz, out["tfds"], "mnist",
                                 "mnist", "train", "test"),
             ours: mnistconv("idx-to-tfds", gz, out["ours"], "-q")},
            before=lambda name: common.remove(out["tfds" if name == base else "ours"]),
            fewer={base: 1})
        common.print_table("TFDS directory, official training + test sets (70000 "
                           "examples)", results, ours)
        if tfds_records(out["tfds"] / "mnist/1.0.0") != \
                tfds_records(out["ours"] / "mnist/1.0.0"):
            raise SystemExit("error: the two TFDS directories hold different Examples")
        ratio = results[base].seconds / results[ours].seconds
        print(f"\n  TFDS {results[base].seconds:.2f} s, mnistconv "
              f"{results[ours].seconds:.2f} s: {ratio:.1f}x faster (CPU time "
              f"{results[base].cpu_seconds:.2f} s vs {results[ours].cpu_seconds:.2f} s); "
              "the same 70000 Examples, each feature byte for byte")
        targets.check(ratio >= TARGET_RATIO, f"TFDS directory {ratio:.1f}x faster than "
                                             f"TFDS' API (target: at least {TARGET_RATIO}x)")
        targets.check(results[ours].peak_mb < TARGET_PEAK_MB,
                      f"idx-to-tfds peak {results[ours].peak_mb:.0f} MB (target: under "
                      f"{TARGET_PEAK_MB} MB)")

        base_ar, ours_ar = "plain script (Pillow, tf.train.Example, ArrayRecordWriter)", \
            "mnistconv idx-to-arrayrecord"

        def fresh(name):
            folder = out["ar" if name == base_ar else "ours_ar"]
            common.remove(folder)
            folder.mkdir()
        results = common.measure(
            {base_ar: [common.PY, str(tmp / "ar_script.py"), gz, out["ar"]],
             ours_ar: mnistconv("idx-to-arrayrecord", gz, out["ours_ar"] / "m.array_record",
                                "-q", "--force")},
            before=fresh)
        common.print_table("ArrayRecord, official training + test sets (70000 examples)",
                           results, ours_ar)
        same = len(array_records(out["ar"])) == len(array_records(out["ours_ar"])) == 70000
        ratio = results[base_ar].seconds / results[ours_ar].seconds
        print(f"\n  plain script {results[base_ar].seconds:.2f} s, mnistconv "
              f"{results[ours_ar].seconds:.2f} s: {ratio:.1f}x faster (CPU time "
              f"{results[base_ar].cpu_seconds:.2f} s vs {results[ours_ar].cpu_seconds:.2f}"
              f" s); 70000 records each: {same}")
        targets.check(results[ours_ar].peak_mb < TARGET_PEAK_MB,
                      f"idx-to-arrayrecord peak {results[ours_ar].peak_mb:.0f} MB (target: "
                      f"under {TARGET_PEAK_MB} MB)")
    targets.exit()


if __name__ == "__main__":
    common.run(main)

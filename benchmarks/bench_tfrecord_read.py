"""tfrecord-to-npz against a tf.data pipeline, as whole processes in the same run (see
common.py for how each figure is taken).

The input is the official 60000-image training set as mnistconv writes it by default
(JPEG quality 95, one-hot labels: the users' recipe). The baseline is what a TensorFlow
user writes to get the same arrays: tf.data.TFRecordDataset, parse_single_example and
tf.io.decode_jpeg in a map with num_parallel_calls=AUTOTUNE (every core), batched, then
np.savez. mnistconv: `mnistconv tfrecord-to-npz` (each record parsed once, JPEGs decoded
as tiles on every core). Both outputs must hold the same pixels and labels (tf's
decode_jpeg defaults are the fast integer IDCT mnistconv decodes with), or the timing
means nothing. Target: at least 8x faster than tf.data.

Then the same with the images written as PNG (`--image-format png`, tf.io.decode_png in
the baseline): a figure, without a target (the plain PNGs of a batch are decoded a tile
at a time, on one thread).
"""

import common
from common import mnistconv

TARGET_RATIO = 8
TF_DATA = r'''
import sys
import numpy as np
import tensorflow as tf

src, out = sys.argv[1:3]
decode = getattr(tf.io, sys.argv[3])  # decode_jpeg or decode_png
features = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([10], tf.int64)}


def parse(record):
    example = tf.io.parse_single_example(record, features)
    image = decode(example["image"], channels=1)[:, :, 0]
    return image, tf.cast(tf.argmax(example["label"]), tf.uint8)


dataset = tf.data.TFRecordDataset(src).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
images, labels = [], []
for x, y in dataset.batch(8192).prefetch(tf.data.AUTOTUNE).as_numpy_iterator():
    images.append(x)
    labels.append(y)
np.savez(out, x_train=np.concatenate(images), y_train=np.concatenate(labels))
'''


def same_arrays(a, b):
    import numpy as np
    with np.load(a) as x, np.load(b) as y:
        for name in ("x_train", "y_train"):
            if not np.array_equal(x[name], y[name]):
                raise SystemExit(f"error: {name} differs between {a.name} and {b.name}")


def main():
    gz, targets = common.start("the baseline", ["tensorflow"], "mnistconv[tensorflow]")
    with common.workdir() as tmp:
        script = tmp / "tfdata_to_npz.py"
        script.write_text(TF_DATA)
        for image_format in ("jpeg", "png"):
            src = tmp / f"train-{image_format}.tfrecord"
            common.run_once(mnistconv("idx-to-tfrecord", gz, src, "--split", "train",
                                      "--image-format", image_format, "-q"))
            decode = f"decode_{image_format}"
            outputs = {f"tf.data (parse, {decode} parallel map, np.savez)": tmp / "tf.npz",
                       "mnistconv tfrecord-to-npz": tmp / "mnistconv.npz"}
            base_name, ours_name = list(outputs)
            commands = {base_name: [common.PY, str(script), str(src),
                                    str(outputs[base_name]), decode],
                        ours_name: mnistconv("tfrecord-to-npz", src, outputs[ours_name],
                                             "-q")}
            results = common.measure(commands,
                                     before=lambda name: common.remove(outputs[name]))
            common.print_table(f"tfrecord-to-npz, official training set as "
                               f"{image_format.upper()} TFRecord (60000 records)",
                               results, ours_name)
            same_arrays(outputs[base_name], outputs[ours_name])
            ours, base = results[ours_name], results[base_name]
            ratio = base.seconds / ours.seconds
            print(f"\n  tf.data {base.seconds:.3f} s, mnistconv {ours.seconds:.3f} s: "
                  f"{ratio:.1f}x faster (CPU time {base.cpu_seconds:.2f} s vs "
                  f"{ours.cpu_seconds:.2f} s); same pixels and labels")
            if image_format == "jpeg":
                targets.check(ratio >= TARGET_RATIO, f"{ratio:.1f}x faster than tf.data "
                                                     f"(target: at least {TARGET_RATIO}x)")
    targets.exit()


if __name__ == "__main__":
    common.run(main)

"""numpy .npz in Keras' layout: the declaration (light, for `--help`); the code and
byte layout are in format.py."""

from ...model.spec import CLASS, MULTILABEL, Format, Holds, Option
from ..common import CLASS_NAMES, SPLIT_NAME, lazy_attributes

SPEC = Format(
    "npz", "mnistconv.formats.npz.format",
    "numpy .npz in Keras' layout (x_train, y_train, x_test, y_test)",
    extensions=(".npz",),
    output_is_one_file=True,
    read_options=(SPLIT_NAME, CLASS_NAMES),
    write_options=(
        Option("compress", "--compress", "deflate the arrays (np.savez_compressed)"),
        Option("layout", "--layout", "array layout of x_*: N,H,W (Keras), N,H,W,1 "
               "(TensorFlow) or N,1,H,W (PyTorch, Caffe)", "choice",
               ("nhw", "nhwc", "nchw"), "nhw"),
        Option("to_float", "--float", "float32 pixels scaled to [0, 1] instead of uint8"),
        Option("label_column", "--label-column", "labels as an (N, 1) column, as Keras' "
               "cifar10/cifar100.load_data give them (default: (N,))"),
        Option("keys", "--keys", "member names: keras (x_<split>, y_<split>) or medmnist "
               "(<split>_images, <split>_labels (N, 1) or (N, k), validation as val: what "
               "the medmnist package loads)", "choice", ("keras", "medmnist"), "keras"),
    ),
    stdio=True,
    holds=Holds(channels=None, dtypes=None, targets=(CLASS, MULTILABEL), extras=True),
    holds_when=(("to_float", True, Holds(channels=None, dtypes=(
        "uint8", "float16", "float32", "float64"), targets=(CLASS, MULTILABEL),
        extras=True)),),
)

__getattr__ = lazy_attributes(SPEC.module)

"""The metadata of a TFDS prepared directory: dataset_info.json, features.json and
<label>.labels.txt, written as TFDS writes them and read back with every claim checked.

dataset_info.json is TFDS' DatasetInfo proto as json_format.MessageToJson(sort_keys=True)
prints it (2-space indent, int64 values as strings):
    {"citation": ..., "description": ..., "fileFormat": "tfrecord" | "array_record",
     "location": {"urls": [homepage]}, "moduleName": ..., "name": "mnist",
     "splits": [{"filepathTemplate": "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}",
                 "name": "train", "numBytes": "<serialized Examples' bytes>",
                 "shardLengths": ["60000"]}, ...],
     "supervisedKeys": {"tuple": {"items": [{"featureKey": "image"},
                                            {"featureKey": "label"}]}},
     "version": "1.0.0"}
features.json is the FeaturesDict as FeatureConnector.save_config writes it
(json.dumps(indent=4, sort_keys=True)):
    {"featuresDict": {"features": {
        "image": {"image": {"dtype": "uint8", "shape": {"dimensions": ["28", "28", "1"]}},
                  "pythonClassName": "tensorflow_datasets.core.features.image_feature.Image"},
        "label": {"classLabel": {"numClasses": "10"},
                  "pythonClassName": "...class_label_feature.ClassLabel"}}},
     "pythonClassName": "tensorflow_datasets.core.features.features_dict.FeaturesDict"}
label.labels.txt holds the class names, one a line. Names and versions follow TFDS'
rules (naming.py, utils/version.py).
"""

import json
import os
import re

from ...errors import CorruptData, FormatError, UsageError
from ...io.fileio import check_input_file, open_input
from ...limits import (MAX_CLASSES, MAX_SHARDS, check_image_size, is_safe_name, printable,
                       parse_json)
from ...family.identity import check_version  # noqa: F401 (the TFDS writer checks with it)
from ...family.sources import FAMILIES

FILEPATH_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
FILE_FORMATS = ("tfrecord", "array_record")
IMAGE_CLASS = "tensorflow_datasets.core.features.image_feature.Image"
LABEL_CLASS = "tensorflow_datasets.core.features.class_label_feature.ClassLabel"
DICT_CLASS = "tensorflow_datasets.core.features.features_dict.FeaturesDict"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}\Z")
_SPLIT = re.compile(r"[A-Za-z0-9_]{1,64}\Z")
MAX_METADATA_BYTES = 16 << 20

_MNIST_CITATION = """\
@article{lecun2010mnist,
  title={MNIST handwritten digit database},
  author={LeCun, Yann and Cortes, Corinna and Burges, CJ},
  journal={ATT Labs [Online]. Available: http://yann.lecun.com/exdb/mnist},
  volume={2},
  year={2010}
}
"""

# TFDS' own builders' (image_classification/mnist.py) description, homepage, citation
# and class names of the MNIST family.
KNOWN = {
    "mnist": ("The MNIST database of handwritten digits.", "http://yann.lecun.com/exdb/mnist/",
              _MNIST_CITATION, [str(d) for d in range(10)]),
    "fashion_mnist": (
        "Fashion-MNIST is a dataset of Zalando's article images consisting of a training "
        "set of 60,000 examples and a test set of 10,000 examples. Each example is a "
        "28x28 grayscale image, associated with a label from 10 classes.",
        "https://github.com/zalandoresearch/fashion-mnist",
        "@article{DBLP:journals/corr/abs-1708-07747,\n  author    = {Han Xiao and\n"
        "               Kashif Rasul and\n               Roland Vollgraf},\n"
        "  title     = {Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine "
        "Learning\n               Algorithms},\n  journal   = {CoRR},\n"
        "  volume    = {abs/1708.07747},\n  year      = {2017},\n"
        "  url       = {http://arxiv.org/abs/1708.07747},\n  archivePrefix = {arXiv},\n"
        "  eprint    = {1708.07747},\n}\n",
        list(FAMILIES["fashion-mnist"].class_names)),
    "kmnist": (
        "Kuzushiji-MNIST is a drop-in replacement for the MNIST dataset (28x28 "
        "grayscale, 70,000 images), provided in the original MNIST format as well as a "
        "NumPy format. Since MNIST restricts us to 10 classes, we chose one character to "
        "represent each of the 10 rows of Hiragana when creating Kuzushiji-MNIST.",
        "http://codh.rois.ac.jp/kmnist/index.html.en",
        "  @online{clanuwat2018deep,\n  author       = {Tarin Clanuwat and Mikel "
        "Bober-Irizar and Asanobu Kitamoto and Alex Lamb and Kazuaki Yamamoto and David "
        "Ha},\n  title        = {Deep Learning for Classical Japanese Literature},\n"
        "  date         = {2018-12-03},\n  year         = {2018},\n"
        "  eprintclass  = {cs.CV},\n  eprinttype   = {arXiv},\n"
        "  eprint       = {cs.CV/1812.01718},\n}\n",
        ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"]),
    "emnist": (
        "The EMNIST dataset is a set of handwritten character digits derived from the "
        "NIST Special Database 19 and converted to a 28x28 pixel image format and dataset "
        "structure that directly matches the MNIST dataset.",
        "https://www.nist.gov/itl/products-and-services/emnist-dataset",
        "@article{cohen_afshar_tapson_schaik_2017,\n    title={EMNIST: Extending MNIST to "
        "handwritten letters},\n    DOI={10.1109/ijcnn.2017.7966217},\n    journal={2017 "
        "International Joint Conference on Neural Networks (IJCNN)},\n    author={Cohen, "
        "Gregory and Afshar, Saeed and Tapson, Jonathan and Schaik, Andre Van},\n"
        "    year={2017}\n}\n", None),
}


def check_name(name):
    """A dataset name TFDS accepts (and that is safe in file names), else exit 2."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise UsageError(None, f"--name {printable(name)} is not a TFDS dataset name",
                         "use a letter, then letters, digits and '_' (at most 64), "
                         "e.g. mnist or my_digits")
    return name


def check_split_name(name, where):
    """TFDS puts the split in its file names between '-' and '.': letters, digits, '_'."""
    if not _SPLIT.match(name):
        raise UsageError(where, f"split {printable(name)} cannot be a TFDS split name",
                         "TFDS split names are letters, digits and '_'; rename it with "
                         "--split-name when reading")
    return name


# The TFDS name of each sources.py family.
FAMILY_NAMES = {"mnist": "mnist", "fashion-mnist": "fashion_mnist", "kmnist": "kmnist",
                "emnist": "emnist"}


def default_name(dataset, known, dst) -> str:
    """The TFDS name when --name is not given: the family's when the input's bytes
    proved it (`known`), else a TFDS directory's own, else one made of the output's
    name (house rule 15: never the family's from class names or file names)."""
    if known:
        return known
    for split in dataset.splits.values():
        name = getattr(split, "tfds_name", None)
        if name:
            return name
    from ...family.identity import neutral_name
    name = re.sub(r"[^A-Za-z0-9_]", "_", neutral_name(dst))[:64]
    return name if _NAME.match(name) else f"d_{name}"[:64]


def class_names(name, splits, num_classes) -> list:
    """Class names: the reader's, else those of the family `name` (the TFDS name of a
    family the bytes proved, or None) when it has that many classes, else '0', '1', ..."""
    for split in splits:
        names = getattr(split.header, "class_names", None) or \
            getattr(split, "class_names", None)
        if names and len(names) == num_classes:
            return [str(n) for n in names]
    known = KNOWN.get(name, (None, None, None, None))[3] if name else None
    if known and len(known) == num_classes:
        return list(known)
    return [str(i) for i in range(num_classes)]


def dataset_info_json(name, version, file_format, splits, identity=None,
                      known=None) -> str:
    """dataset_info.json's text. splits: [(split name, numBytes, [shard lengths])];
    identity: what the metadata states (identity.Identity); known: the TFDS name of the
    family the bytes proved, whose TFDS texts stand where nothing was given."""
    description, homepage, citation, _ = KNOWN.get(known, (None, None, None, None)) \
        if known else (None, None, None, None)
    license_ = ""
    if identity is not None:
        def stated(key, tfds_text):
            value = getattr(identity, key)
            return value if key in identity.given or not tfds_text else tfds_text
        description, homepage, citation = (stated("description", description),
                                           stated("homepage", homepage),
                                           stated("citation", citation))
        license_ = identity.license
    description = description or f"{name}, converted by mnistconv."
    info = {
        "description": description,
        "fileFormat": file_format,
        "moduleName": "mnistconv",
        "name": name,
        "splits": [{"filepathTemplate": FILEPATH_TEMPLATE, "name": split,
                    "numBytes": str(num_bytes),
                    "shardLengths": [str(n) for n in lengths]}
                   for split, num_bytes, lengths in splits],
        "supervisedKeys": {"tuple": {"items": [{"featureKey": "image"},
                                               {"featureKey": "label"}]}},
        "version": version,
    }
    if citation:
        info["citation"] = citation
    if homepage:
        info["location"] = {"urls": [homepage]}
    if license_:  # DatasetInfo's RedistributionInfo.license
        info["redistributionInfo"] = {"license": license_}
    return json.dumps(info, indent=2, sort_keys=True)


def features_json(shape, num_classes) -> str:
    """features.json's text for an (H, W) grey or (H, W, 3) RGB image and a ClassLabel."""
    channels = shape[2] if len(shape) == 3 else 1
    features = {"featuresDict": {"features": {
        "image": {"image": {"dtype": "uint8",
                            "shape": {"dimensions": [str(shape[0]), str(shape[1]),
                                                     str(channels)]}},
                  "pythonClassName": IMAGE_CLASS},
        "label": {"classLabel": {"numClasses": str(num_classes)},
                  "pythonClassName": LABEL_CLASS}}},
        "pythonClassName": DICT_CLASS}
    return json.dumps(features, indent=4, sort_keys=True)


def shard_name(name, split, file_format, index, total):
    """<name>-<split>.<format>-00000-of-00001, as FILEPATH_TEMPLATE expands."""
    return f"{name}-{split}.{file_format}-{index:05d}-of-{total:05d}"


def tfds_shard_count(total_bytes, count):
    """TFDS' own number of shards (utils/shard_utils.py ShardConfig): 64 MiB to 1 GiB
    per shard with 16 bytes a record, a power of two up to 1024 (or a multiple of
    1024), never more than the records."""
    total = total_bytes + 16 * count
    most, least = total // (64 << 20), total // (1024 << 20)
    if least <= 1024 <= most and count >= 1024:
        return 1024
    if least > 1024:
        n = 2048
        while not (n >= least and count >= n):
            n += 1024
        return n
    for n in (512, 256, 128, 64, 32, 16, 8, 4, 2):
        if least <= n <= most and count >= n:
            return n
    return 1


def tfds_bounds(count, shards):
    """Where each shard ends, as TFDS cuts (get_shard_boundaries: rounded)."""
    return [round(count * i / shards) for i in range(1, shards + 1)]


def load_json(path, root=None):
    """A metadata file's JSON, bounded in size, read only inside root."""
    if not os.path.lexists(path):
        raise FormatError(path, "missing: a TFDS dataset directory holds it",
                          "copy it back, or download the dataset again")
    size = check_input_file(path, root)  # a FIFO would block the open, a device never end
    if size > MAX_METADATA_BYTES:
        raise CorruptData(path, f"is {size:,} bytes, more than a TFDS metadata file "
                                f"({MAX_METADATA_BYTES:,} at most)")
    with open_input(path, root) as f:
        return parse_json(f.read(), path, "is ")


def _count(value, path, what, low=0, high=1 << 62):
    """An int64 field (a string in TFDS' JSON, or a number), checked."""
    try:
        number = int(value) if isinstance(value, (int, str)) and \
            not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None or not low <= number <= high:
        raise CorruptData(path, f"{what} is {printable(value)}, not a count "
                                f"{low}..{high}")
    return number


class Info:
    """What a TFDS directory's metadata says, checked: name, file format, splits
    {name: (shard lengths, numBytes)}, image shape, classes, image and label keys."""

    def __init__(self, directory, root=None):
        self.directory, self.root = directory, root
        info_path = os.path.join(directory, "dataset_info.json")
        features_path = os.path.join(directory, "features.json")
        info = load_json(info_path, root)
        if not isinstance(info, dict):
            raise CorruptData(info_path, "is not a DatasetInfo object")
        self.name = info.get("name")
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise CorruptData(info_path, f"dataset name {printable(self.name)} is not "
                                         "a TFDS name")
        self.file_format = info.get("fileFormat") or "tfrecord"
        if self.file_format not in FILE_FORMATS:
            raise FormatError(info_path, f"fileFormat {printable(self.file_format)}",
                                         f"mnistconv reads {', '.join(FILE_FORMATS)}")
        splits = info.get("splits")
        if not isinstance(splits, list) or not splits:
            raise CorruptData(info_path, "lists no splits")
        self.splits = {}
        for entry in splits:
            if not isinstance(entry, dict):
                raise CorruptData(info_path, "a split entry is not an object")
            split = entry.get("name")
            if not isinstance(split, str) or not _SPLIT.match(split) or \
                    not is_safe_name(split):
                raise CorruptData(info_path, f"split name {printable(split)} is not a "
                                             "safe TFDS split name")
            template = entry.get("filepathTemplate", FILEPATH_TEMPLATE)
            if template != FILEPATH_TEMPLATE:
                raise FormatError(info_path, f"split {split}: filepathTemplate "
                                             f"{printable(template)} is not TFDS' default",
                                  f"mnistconv reads {FILEPATH_TEMPLATE}")
            lengths = entry.get("shardLengths")
            if not isinstance(lengths, list) or not 1 <= len(lengths) <= MAX_SHARDS:
                raise CorruptData(info_path, f"split {split}: shardLengths must list 1 "
                                             f"to {MAX_SHARDS} shards")
            lengths = [_count(n, info_path, f"split {split}: a shard length", 0)
                       for n in lengths]
            num_bytes = entry.get("numBytes")
            num_bytes = None if num_bytes is None else \
                _count(num_bytes, info_path, f"split {split}: numBytes")
            self.splits[split] = (lengths, num_bytes)
        self.image_key, self.label_key, self.shape, self.num_classes = \
            _features(load_json(features_path, root), features_path)
        names_path = os.path.join(directory, f"{self.label_key}.labels.txt")
        self.class_names = None
        if os.path.lexists(names_path):
            if check_input_file(names_path, root) > MAX_METADATA_BYTES:
                raise CorruptData(names_path, "is larger than a list of class names")
            with open_input(names_path, root, "r", encoding="utf-8", errors="replace") as f:
                names = [n.strip() for n in f.read().split("\n") if n.strip()]
            if len(names) != self.num_classes:
                raise CorruptData(names_path, f"names {len(names)} classes, features.json "
                                              f"says {self.num_classes}")
            from ...codecs.classes import check_names
            self.class_names = list(check_names(names, names_path))

    def shard_files(self, split):
        """The files of a split, as the template names them."""
        lengths = self.splits[split][0]
        return [os.path.join(self.directory, shard_name(self.name, split, self.file_format,
                                                        i, len(lengths)))
                for i in range(len(lengths))]


def _object(value, path, what) -> dict:
    """A JSON object of the file (missing: empty), else CorruptData naming `what`."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean"}.get(type(value), "a number")
        raise CorruptData(path, f"{what} is {kind}, not a JSON object")
    return value


def _features(features, path):
    """(image key, label key, (H, W), classes) of a FeaturesDict's Image and ClassLabel."""
    try:
        entries = features["featuresDict"]["features"]
        assert isinstance(entries, dict)
    except (KeyError, TypeError, AssertionError):
        raise CorruptData(path, "is not a FeaturesDict") from None
    images = [k for k, v in entries.items() if isinstance(v, dict) and
              v.get("pythonClassName") == IMAGE_CLASS]
    labels = [k for k, v in entries.items() if isinstance(v, dict) and
              v.get("pythonClassName") == LABEL_CLASS]
    if len(images) != 1 or len(labels) != 1:
        raise FormatError(path, f"has {len(images)} Image and {len(labels)} ClassLabel "
                                "features", "mnistconv reads image classification datasets "
                                "(one of each)")
    for key in images + labels:  # a key names a side file (<label>.labels.txt): data
        if not is_safe_name(key):
            raise FormatError(path, f"feature name {printable(key)} is not a safe name",
                              "feature names are letters, digits, '_', '-' and '.'")
    image = _object(entries[images[0]].get("image"), path, f"feature {images[0]}'s image")
    dims = _object(image.get("shape"), path, f"feature {images[0]}'s shape").get("dimensions")
    if image.get("dtype", "uint8") != "uint8" or not isinstance(dims, list) or \
            len(dims) != 3:
        raise FormatError(path, f"image feature {printable(images[0])} is "
                                f"{printable(image.get('dtype'))} of shape "
                                f"{printable(dims)}", "mnistconv reads uint8 H x W x 1 or 3")
    shape = tuple(_count(d, path, "an image dimension", 1) for d in dims)
    if shape[2] not in (1, 3):
        raise FormatError(path, f"images have {shape[2]} channels", "mnistconv reads "
                                "grey (1 channel) and RGB (3)")
    check_image_size(shape[:2], path)
    label = _object(entries[labels[0]].get("classLabel"), path,
                    f"feature {labels[0]}'s classLabel")
    num_classes = _count(label.get("numClasses"), path, "numClasses", 1, MAX_CLASSES)
    # (H, W) for grey, as the splits' headers say it; (H, W, 3) for RGB.
    return images[0], labels[0], shape[:2] if shape[2] == 1 else shape, num_classes

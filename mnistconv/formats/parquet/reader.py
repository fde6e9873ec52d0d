"""Reading Hugging Face Parquet (layout in __init__.py): a file, a shard set, a config
folder, or a dataset directory with one or more config folders, as the Hub and
`datasets` lay them out. Only the footers are read to build the splits; labels are read
as one column, images a batch at a time and decoded (PNG or JPEG) on threads.
"""

import io
import os
import re
from contextlib import contextmanager

import numpy as np

from ...errors import (BadImage, CorruptData, FormatError, MissingDependency,
    OverLimit, UsageError, WrongFormat)
from ...io.fileio import check_input_file, has_magic, input_entries, input_size, library_path
from ...limits import (MAX_CLASSES, MAX_EXAMPLES, MAX_ROW_GROUP_BYTES,
                       MAX_THREADED_IMAGE_PIXELS, check_image_size,
                       parse_json, printable, safe_split_name)
from ...workers.parallel import check_workers, ordered_map
from .pages import check_made
from ...io import budget
from ...model.records import DEFAULT_BATCH, Batch, Dataset, Header, Split
from ...io.shards import in_split_order
from ... import codecs
from ...codecs import classes
from ...codecs.images import decode_all
from ...codecs.png import threads_for_pngs

MAGIC = b"PAR1"
# push_to_hub's shard names (older versions add a fingerprint: -00000-of-00004-5e5bd8ef).
_SHARD = re.compile(r"(?P<split>.+?)-(?P<index>\d{5})-of-(?P<total>\d{5})(-[0-9a-f]+)?"
                    r"\.parquet")
# The Hub's converted layout (refs/convert/parquet): <config>/<split>/0000.parquet.
_NUMBERED = re.compile(r"(partial-)?\d{4,5}\.parquet")
_EXPECTED = ("mnistconv reads an image column (a struct of PNG or JPEG bytes and a path, "
             "as datasets' Image() stores it) and an integer label column")


def pyarrow(feature="Parquet"):
    """(pyarrow, pyarrow.parquet), or the MissingDependency naming the extra."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingDependency("pyarrow", "parquet", feature) from None
    return pa, pq


@contextmanager
def _arrow_errors(path):
    """pyarrow's errors on a damaged file said as one FormatError line."""
    pa, _ = pyarrow("reading Parquet")
    try:
        yield
    except (pa.ArrowException, OSError, ValueError) as e:
        reason = " ".join(str(e).split())[:200]
        raise WrongFormat(path, f"not a valid Parquet file ({reason})") from None


def _open(path):
    """pq.ParquetFile, its errors said as one FormatError line."""
    try:
        check_input_file(path)  # a FIFO or device: pyarrow's open would block on it
    except UsageError as e:
        raise FormatError(path, e.message, e.hint, e.cli_hint) from None
    with _arrow_errors(path), library_path(path) as guarded:
        return pyarrow("reading Parquet")[1].ParquetFile(guarded)


def _iter_batches(pf, path, **options):
    with _arrow_errors(path):
        yield from pf.iter_batches(**options)


def _read_column(path, name):
    with _arrow_errors(path):
        return _open(path).read(columns=[name]).column(0)


def _features(schema, path):
    """The datasets features in the schema's `huggingface` metadata (JSON), or {}."""
    raw = (schema.metadata or {}).get(b"huggingface")
    if not raw:
        return {}
    try:
        features = parse_json(raw, path, "its huggingface metadata is ")["info"]["features"]
    except (KeyError, TypeError):
        return {}
    return features if isinstance(features, dict) else {}


class _Layout:
    """Which columns hold the image and the label, and the class names, of one file."""

    def __init__(self, path, schema):
        import pyarrow as pa
        features = _features(schema, path)
        names = schema.names

        def typed(kind):
            return [n for n in names if isinstance(features.get(n), dict)
                    and features[n].get("_type") == kind]
        image = "image" if "image" in names else next(iter(typed("Image")), None)
        label = "label" if "label" in names else next(iter(typed("ClassLabel")), None)
        ok = image is not None and label is not None
        if ok:
            image_type = schema.field(image).type
            label_type = schema.field(label).type
            ok = pa.types.is_struct(image_type) and \
                image_type.get_field_index("bytes") >= 0 and \
                (pa.types.is_binary(image_type.field("bytes").type)
                 or pa.types.is_large_binary(image_type.field("bytes").type)) and \
                pa.types.is_integer(label_type)
        if not ok:
            shown = ", ".join(f"{printable(f.name, 30)} ({f.type})" for f in schema)
            raise FormatError(path, f"is not an image classification Parquet: its columns "
                                    f"are {shown[:300]}", _EXPECTED)
        self.image, self.label = image, label
        self.types = (str(schema.field(image).type), str(schema.field(label).type))
        # Extra fields (QMNIST's): int64 columns (a Hub id, a timestamp) need not fit int32.
        self.extras = tuple(f.name for f in schema if f.name not in (image, label)
                            and pa.types.is_integer(f.type) and f.type.bit_width <= 32
                            and f.type != pa.uint32())
        class_names = features.get(label, {}).get("names") \
            if isinstance(features.get(label), dict) else None
        if isinstance(class_names, list) and len(class_names) <= MAX_CLASSES and \
                all(isinstance(n, str) for n in class_names):
            self.class_names = list(classes.check_names(class_names, path,
                                                        "ClassLabel names"))
        else:
            self.class_names = None


# Channels of Pillow modes read as stored (a palette looked up: RGB, RGBA with
# transparency; YCbCr, LAB and HSV as RGB); the rest are grey (1, L, datasets' int64
# image: a mode I TIFF).
_MODE_CHANNELS = {"LA": 2, "RGB": 3, "YCbCr": 3, "LAB": 3, "HSV": 3, "RGBA": 4,
                  "PA": 4, "CMYK": 4}


def _mode_channels(image) -> int:
    if image.mode == "P":
        return 4 if "transparency" in image.info else 3
    return _MODE_CHANNELS.get(image.mode, 1)


def _pillow(data, where):
    """An opened Pillow image whose header is within the limits (nothing decoded)."""
    import warnings

    from PIL import Image
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        image = Image.open(io.BytesIO(data))
    check_image_size((image.height, image.width), where)
    return image


def _image_shape(data, where):
    """(h, w) for a grey image, (h, w, c) for colour with the channels it stores
    (nothing is made grey or dropped unasked), from its header."""
    size = codecs.image_size(data)
    if size is None:
        try:
            with _pillow(data, where) as image:
                size, channels = (image.height, image.width), _mode_channels(image)
        except FormatError:
            raise
        except Exception:
            raise BadImage(where, f"is not an image (starts {data[:8]!r})") from None
        return size + ((channels,) if channels > 1 else ())
    check_image_size(size, where)
    shape = codecs.image_shape(data)
    if shape is None:
        raise BadImage(where, f"is not an image (starts {data[:8]!r})")
    return shape


def _check_claimed_size(data, shape, where):
    """The size an image's header claims is the split's, else a FormatError naming the row."""
    claimed = codecs.image_size(data)
    if claimed is not None and claimed != tuple(shape[:2]):
        raise FormatError(where, f"image is {claimed[0]}x{claimed[1]}, the split's images "
                                 f"are {'x'.join(map(str, shape))}",
                          "mnistconv keeps one image size per split")


def _decode(data, shape, where):
    """One image's pixels in `shape`, or a FormatError naming the row."""
    _check_claimed_size(data, shape, where)
    try:
        kind = codecs.image_kind(data)
        if kind == "png" or (kind == "jpeg" and len(shape) == 2):
            # As stored (grey JPEG as TensorFlow decodes it): channels are kept.
            pixels = codecs.decode_image(data)
        else:
            with _pillow(data, where) as image:
                channels = _mode_channels(image)
                if channels == 1:
                    pixels = np.asarray(image.convert("L")) if image.mode in ("1", "L") \
                        else _eight_bit(np.asarray(image), where)
                else:
                    pixels = np.asarray(image.convert({2: "LA", 3: "RGB", 4: (
                        "CMYK" if image.mode == "CMYK" else "RGBA")}[channels]))
        if pixels.ndim == 2 and len(shape) == 3 and shape[2] == 3:
            # A grey image in a colour split (datasets mixes them): R = G = B, as
            # Pillow's convert("RGB") gives; nothing is lost. Never the other way.
            pixels = np.repeat(pixels[:, :, None], 3, axis=2)
    except FormatError:
        raise
    except ValueError as e:
        raise BadImage(where, f"image does not decode ({e})") from None
    except Exception as e:  # Pillow raises many kinds
        raise BadImage(where, f"image does not decode ({codecs.pillow_reason(e)})") from None
    if pixels.shape != tuple(shape):
        got = "x".join(map(str, pixels.shape))
        raise FormatError(where, f"image is {got}, the split's images are "
                                 f"{'x'.join(map(str, shape))}",
                          "mnistconv keeps one image size and channel count per "
                          "split (it makes no colour grey unasked)")
    return pixels


def _eight_bit(pixels, where):
    """A 16/32-bit or float image of whole numbers 0..255 (datasets' int64 image) as uint8."""
    if pixels.size and (pixels.min() < 0 or pixels.max() > 255 or
                        (pixels.dtype.kind == "f" and (pixels != np.floor(pixels)).any())):
        raise FormatError(where, f"image holds {pixels.dtype.name} values outside 0..255",
                          "mnistconv keeps 8-bit pixels and will not scale them")
    return pixels.astype(np.uint8)


class ParquetSplit(Split):
    """One split: its Parquet `files`, read in order; shards() gives one split per file
    (loaders hand files to workers)."""

    carries_extras = True

    def __init__(self, name, files, workers=None, _known=None):
        self.files = list(files)
        self.workers = check_workers(workers)
        self._extras = self._labels = None
        # The most one image value may make (its page or dictionary): sizes the reads.
        self.row_bytes = 1
        if _known is not None:
            self.layouts, header, self.class_names = _known
            super().__init__(name, header)
            return
        self.layouts = []
        count, first = 0, None
        for path in self.files:
            pf = _open(path)
            layout = _Layout(path, pf.schema_arrow)
            if self.layouts and layout.types != self.layouts[0].types:
                raise CorruptData(path, f"its columns ({', '.join(layout.types)}) differ "
                                        f"from {os.path.basename(self.files[0])}'s")
            self.layouts.append(layout)
            meta = pf.metadata
            for i in range(meta.num_row_groups):
                if meta.row_group(i).total_byte_size > MAX_ROW_GROUP_BYTES:
                    raise OverLimit(path, f"row group {i} declares "
                                            f"{meta.row_group(i).total_byte_size:,} bytes, "
                                            f"more than mnistconv's limit of "
                                            f"{MAX_ROW_GROUP_BYTES:,}")
            self.row_bytes = max(self.row_bytes, check_made(path, meta, layout.image))
            count += meta.num_rows
            if count > MAX_EXAMPLES:
                raise OverLimit(path, f"the split holds {count:,} rows, more than "
                                        f"mnistconv's limit of {MAX_EXAMPLES:,} per split")
            if first is None and meta.num_rows:
                first = self._first_image(pf, layout, path)
        self.class_names = next((lay.class_names for lay in self.layouts
                                 if lay.class_names), None)
        shape = _image_shape(first, f"{self.files[0]}: row 0") if first else (0, 0)
        # Rows sharing a dictionary value cost a few bytes each: a bomb's work (budget.py).
        budget.check_expansion(", ".join(self.files), count, budget.image_bytes(shape),
                               sum(input_size(p) for p in self.files))
        header = Header(count, shape, np.dtype(np.uint8), np.dtype(np.int64),
                        len(self.class_names) if self.class_names else None,
                        ", ".join(self.files), tuple(self.class_names or ()))
        super().__init__(name, header)

    @staticmethod
    def _first_image(pf, layout, path):
        for batch in _iter_batches(pf, path, batch_size=1, columns=[layout.image]):
            data = batch.column(0).field("bytes")[0].as_py() if len(batch) else None
            if data is None:
                raise FormatError(path, "row 0 has no image bytes",
                                  "mnistconv reads images stored in the file, not paths")
            return data
        return None

    def shards(self):
        """One split per file, in order, each knowing the whole split's header."""
        if len(self.files) == 1:
            return [self]
        splits = []
        for path, layout in zip(self.files, self.layouts):
            count = _open(path).metadata.num_rows
            split = ParquetSplit(self.name, [path], self.workers,
                                 ([layout], self.header.with_(count=count, source=path),
                                  self.class_names))
            split.row_bytes = self.row_bytes
            splits.append(split)
        return splits

    def labels(self):
        if self._labels is None:
            parts = []
            for path, layout in zip(self.files, self.layouts):
                part = _integer_column(path, layout.label, "label", "give every row a label")
                classes.check_labels(part, path)  # before int64: a uint64 2**64-1 is not -1
                part = part.astype(np.int64, copy=False)
                # A label past its ClassLabel's names is no class (datasets' int2str).
                classes.check_covers(self.class_names or (), part, path, self.name,
                                     hint="the file's ClassLabel feature does not name "
                                          "it")
                parts.append(part)
            self._labels = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return self._labels

    def indices(self):
        """0 .. count-1: the rows' order."""
        return np.arange(self.header.count, dtype=np.int64)

    def extra_fields(self):
        """(names, N x k int32) of the integer columns beside image and label (the
        records' extra fields: QMNIST's columns), else None. Read, and checked to fit
        int32, on the first call."""
        names = self.layouts[0].extras if self.layouts else ()
        if not names:
            return None
        if self._extras is None:
            from .. import extras
            extras.check_names(names, self.files[0], (self.layouts[0].image,
                                                      self.layouts[0].label))
            parts = []
            for path, layout in zip(self.files, self.layouts):
                if layout.extras != names:
                    raise CorruptData(path, f"its integer columns "
                                            f"({', '.join(layout.extras) or 'none'}) "
                                            f"differ from {os.path.basename(self.files[0])}"
                                            f"'s ({', '.join(names)})")
                parts.append(np.stack([_int32_column(path, name) for name in names], 1))
            self._extras = np.concatenate(parts)
        return names, self._extras

    def _decode_rows(self, values, shape, path, at):
        """The pixels of encoded images (rows at, at + 1, ...), decoded on threads
        (small PNGs on one: png.threads_for_pngs)."""
        n = len(values)
        images = np.empty((n,) + tuple(shape), np.uint8)
        step = max(64, -(-n // (4 * self.workers)))

        def decode(start):
            decode_all(values[start:start + step], images[start:start + step],
                       lambda k, data: _decode(data, shape, f"{path}: row {at + start + k}"))
        workers = self.workers if int(np.prod(shape)) <= MAX_THREADED_IMAGE_PIXELS else 1
        if n and codecs.image_kind(values[0]) == "png":
            workers = threads_for_pngs(workers, shape)
        for _ in ordered_map(decode, range(0, n, step), workers):
            pass
        return images

    def batches(self, batch_size=DEFAULT_BATCH):
        labels = self.labels()
        shape = self.header.shape
        batch_size = budget.rows(self.header, batch_size)
        # Every claimed size of _CHECK_ROWS rows is checked before any row is decoded;
        # pyarrow makes a fetch's values at once, so a fetch is as many rows as fit the
        # budget at the most one row can make (its page or its dictionary, _check_made).
        # Half the budget: arrow's builder grows by doubling, so while it makes a fetch
        # it holds up to twice its values (72 MB for a 32 MB fetch of 4 MB rows).
        fetch = max(1, min(max(batch_size, _CHECK_ROWS),
                           budget.BATCH_BYTES // 2 // max(1, self.row_bytes)))
        at = 0
        pending, held = [], 0  # values read and not yet decoded, and their bytes

        def decoded(path):
            nonlocal at, pending, held
            part, pending, held = pending, [], 0
            batch = Batch(self._decode_rows(part, shape, path, at),
                          labels[at:at + len(part)],
                          np.arange(at, at + len(part), dtype=np.int64))
            at += len(part)
            return batch
        for path, layout in zip(self.files, self.layouts):
            for batch in _iter_batches(_open(path), path, batch_size=fetch,
                                       columns=[layout.image]):
                column = batch.column(0).field("bytes")
                if column.null_count:
                    row = at + len(pending) + next(i for i in range(len(column))
                                                   if not column[i].is_valid)
                    raise FormatError(path, f"row {row} has no image bytes",
                                      "mnistconv reads images stored in the file, "
                                      "not paths")
                values = column.to_pylist()
                del batch, column
                if batch_size < len(values):
                    for i, data in enumerate(values):
                        _check_claimed_size(data, shape,
                                            f"{path}: row {at + len(pending) + i}")
                for data in values:
                    pending.append(data)
                    held += len(data)
                    if len(pending) >= batch_size or held >= budget.BATCH_BYTES:
                        yield decoded(path)
                del values
            if pending:
                yield decoded(path)
        if at != self.header.count:
            raise CorruptData(self.header.source, f"holds {at} rows, its footers say "
                                                  f"{self.header.count}")


def _integer_column(path, name, what, hint):
    """An integer column of a file as numpy; a FormatError naming `what` for a null."""
    column = _read_column(path, name)
    if column.null_count:
        raise FormatError(path, f"{column.null_count} rows have no {what}", hint)
    return np.concatenate([_integers(c) for c in column.chunks] or [np.zeros(0, np.int64)])


def _int32_column(path, name):
    """An integer column of a file as int32; a FormatError for a null or a misfit."""
    from ..extras import INT32
    values = _integer_column(path, name, printable(name),
                             "give every row a value, or drop the column")
    if len(values) and (int(values.min()) < INT32[0] or int(values.max()) > INT32[1]):
        bad = int(values.min()) if int(values.min()) < INT32[0] else int(values.max())
        raise FormatError(path, f"column {printable(name)} holds {bad}, which does "
                                "not fit int32", "extra fields are int32")
    return values.astype(np.int32)


_CHECK_ROWS = 1024  # rows whose sizes are checked together (batches())


def _integers(array):
    """An integer Arrow array without nulls as numpy, from its buffer (to_numpy() imports pandas)."""
    import pyarrow as pa
    kind = "i" if pa.types.is_signed_integer(array.type) else "u"
    dtype = np.dtype(f"<{kind}{array.type.bit_width // 8}")
    return np.frombuffer(array.buffers()[1], dtype, len(array),
                         array.offset * dtype.itemsize)


def _config_splits(folder, root):
    """{split: [files]} of one config folder: shard sets, <split>.parquet, <split>/NNNN.parquet."""
    groups = {}
    for path in input_entries(folder, root):
        entry = os.path.basename(path)
        if os.path.isdir(path):
            if numbered := _numbered_in(path, root):
                groups.setdefault(entry, []).extend(numbered)
            continue
        if not entry.lower().endswith(".parquet"):
            continue
        m = _SHARD.fullmatch(entry)
        name = m["split"] if m else entry[:-len(".parquet")]
        groups.setdefault(name, []).append(path)
    for name, files in groups.items():
        safe_split_name(name, folder)
        _check_shard_set(name, files)
    return {s: groups[s] for s in in_split_order(groups)}


def _check_shard_set(name, files):
    """Shards of one split: one set, every index from 0 below the total, once."""
    numbers = [_SHARD.fullmatch(os.path.basename(f)) for f in files]
    if not any(numbers):
        return
    totals = {int(m["total"]) if m else None for m in numbers}
    if len(totals) != 1 or None in totals:
        raise FormatError(files[0], f"split {printable(name)} has files of several shard "
                                    "sets", "keep one set per split")
    total = totals.pop()
    indices = sorted(int(m["index"]) for m in numbers)
    if indices != list(range(total)):
        missing = sorted(set(range(total)) - set(indices))
        raise FormatError(files[0], f"shard set incomplete: split {printable(name)} has "
                                    f"{len(indices)} of {total} shards" +
                          (f", first missing {missing[0]:05d}" if missing else ""),
                          "copy the missing shards, or download the set again")


def _numbered_in(folder, root):
    """The NNNN.parquet files of a split folder, in order."""
    return input_entries(folder, root, _NUMBERED.fullmatch, "file")


def _configs(path):
    """{config folder name: {split: files}} of the folders under a dataset directory."""
    found = {}
    for sub in input_entries(path, path, kind="dir"):
        # A split folder (<split>/0000.parquet) is not a config.
        if not _numbered_in(sub, path) and (splits := _config_splits(sub, path)):
            found[os.path.basename(sub)] = splits
    return found


def _directory_splits(path, config):
    here = _config_splits(path, path)
    configs = _configs(path)
    if config is not None:
        folder = config if config in configs else \
            "data" if config == "default" and "data" in configs else None
        if folder is None:
            raise UsageError(path, f"has no config {printable(config)}",
                             f"it has: {', '.join(configs) or 'none'}")
        return configs[folder]
    if here:
        return here
    if len(configs) == 1:
        return next(iter(configs.values()))
    if configs:
        raise UsageError(path, f"holds several configs ({', '.join(configs)})",
                         "choose one with --config")
    raise FormatError(path, "holds no Parquet files",
                      "expected <config>/<split>-00000-of-00001.parquet or "
                      "<split>.parquet files")


def read(path, config=None, workers=None) -> Dataset:
    """A Parquet file, shard set or dataset directory in the Hub's layout as a
    dataset. A directory with several config folders needs `config`. workers: threads
    decoding images (default: every core).

        ds = read("mnist-hf/")                       # data/ or the one <config>/
        ds = read("fashion_mnist/", config="fashion_mnist")
        ds.splits["train"].class_names               # ['0', ..., '9'] (or the names)
    """
    path = str(path)
    if os.path.isdir(path):
        groups = _directory_splits(path, config)
    else:
        check_input_file(path)
        name = os.path.basename(path)
        m = _SHARD.fullmatch(name)
        if m:
            folder = os.path.dirname(path) or "."
            groups = {m["split"]: _config_splits(folder, folder).get(m["split"], [path])}
        elif _NUMBERED.fullmatch(name):
            groups = {os.path.basename(os.path.dirname(os.path.abspath(path))): [path]}
        else:
            groups = {name[:-len(".parquet")] if name.lower().endswith(".parquet")
                      else name: [path]}
    splits = {name: ParquetSplit(name, files, workers) for name, files in groups.items()}
    files = [f for files in groups.values() for f in files]
    return Dataset("parquet", splits, files)


def sniff(path) -> bool:
    """A file starting with Parquet's magic PAR1, or a directory holding .parquet files
    at most two folders down."""
    if os.path.isfile(path):
        return has_magic(path, MAGIC)
    if not os.path.isdir(path):
        return False
    for entry in input_entries(path):
        if entry.endswith(".parquet") and not os.path.isdir(entry):
            return True
        if os.path.isdir(entry):
            for inner in input_entries(entry, path):
                if inner.endswith(".parquet") or (os.path.isdir(inner) and any(
                        n.endswith(".parquet") for n in input_entries(inner, path))):
                    return True
    return False


def matches_name(path) -> bool:
    """A .parquet name."""
    return str(path).lower().rstrip("/").endswith(".parquet")

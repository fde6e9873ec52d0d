"""numpy .npz in Keras' layout (the layout of keras.datasets.mnist's mnist.npz).

An .npz is a zip archive of .npy members. Each member is the NPY format
(https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html):
    6 bytes  b"\\x93NUMPY", 2 bytes version, a little-endian header length (2 bytes in
    version 1.0, 4 in 2.0), an ASCII Python dict {'descr', 'fortran_order', 'shape'}
    padded to 64 bytes, then the raw array.
Keras' mnist.npz holds x_train uint8 (60000, 28, 28), y_train uint8 (60000,),
x_test uint8 (10000, 28, 28), y_test uint8 (10000,); other splits are x_<split>, y_<split>.
Colour images are (N, H, W, 3). Keras' cifar10.npz layout (cifar10.load_data) has labels
as a column, y_train (N, 1): read as (N,), written with label_column=True. With
keys="medmnist" the writer uses MedMNIST's names instead (formats/medmnist): train_images,
train_labels (N, 1), or (N, k) for multi-label targets, and val_* for validation.
`class_names` holds the class names by label as fixed-width unicode ('<U<n>', never
objects: np.load reads it without allow_pickle); QMNIST's extra label columns are
`extra_<split>` (N x k, int32) with their names in `extra_columns` ('<U<n>', k).

Both directions stream member by member, batch by batch. Members carry a fixed
1980-01-01 date and are written without seeking, each CRC-32 and size in a data
descriptor after its data (flag bit 3; zip64 sizes), as zipfile writes to any unseekable
stream. Only plain arrays are read or written (no pickled object arrays).
"""

import contextlib
import hashlib
import queue
import threading
import time
import zipfile
from typing import Optional

import numpy as np

from ...errors import CorruptData, FormatError, OverLimit, UsageError
from ...io.inputzip import InputZip
from ...io.fileio import check_input_file, has_magic, open_staged
from ...io import budget
from ...limits import printable, safe_split_name
from ...model.schema import schema_of
from ...model.records import DEFAULT_BATCH, Batch, Dataset, Header, OutputFile, \
    Split, iter_batches
from ...io.shards import in_split_order
from ...model.stream import extra_fields
from ...codecs import classes
from ..common import InOrder
from ..contract import Counters, ShardTarget, ShardedWrite
from ...codecs.classes import check_labels
from ...codecs.images import MAX_DIMS, check_split_header
from ...codecs.npy import ZIP_MAGIC, check_sizes, open_member, read_member, \
    read_npy_header, row_batches, zip_errors

FIXED_DATE = (1980, 1, 1, 0, 0, 0)
# MedMNIST's split names (keys="medmnist"), by mnistconv's.
MEDMNIST_SPLITS = {"train": "train", "validation": "val", "test": "test"}
MAX_EXTRA_COLUMNS = 64  # QMNIST has 7
MAX_LABEL_WIDTH = 1024  # of a multi-label target (ChestMNIST has 14)
# Column-major (Fortran-order) images cannot be streamed by rows: they are read whole.
FORTRAN_MAX_BYTES = 64 << 20


class NpzSplit(InOrder, Split):

    carries_extras = True
    def __init__(self, name, path, archive: zipfile.ZipFile):
        self.path = path
        self.x_name, self.y_name = f"x_{name}.npy", f"y_{name}.npy"
        f, shape, dtype, fortran = open_member(archive, self.x_name, path)
        f.close()
        if len(shape) < 1:
            raise FormatError(path, f"x_{name} is a scalar, expected one image per row",
                              f"save x_{name} with one image per row")
        if len(shape) > MAX_DIMS:
            raise OverLimit(path, f"x_{name} has {len(shape)} dimensions, more than "
                                    f"mnistconv's limit of {MAX_DIMS}")
        # One dimension is the same bytes in either order.
        self.fortran = fortran and len(shape) > 1
        f, y_shape, y_dtype, _ = open_member(archive, self.y_name, path)
        f.close()
        # (N, 1) is Keras' CIFAR layout (cifar10.load_data): one label per example too;
        # (N, k) a multi-label target (ChestMNIST's 14), k values of 0 or 1 per example.
        self.column = len(y_shape) == 2 and y_shape[1] == 1
        self.width = y_shape[1] if len(y_shape) == 2 and y_shape[1] > 1 else 0
        if len(y_shape) not in (1, 2) or (self.width and y_dtype.kind not in "iub") or \
                self.width > MAX_LABEL_WIDTH:
            raise FormatError(path, f"y_{name} has shape {y_shape}, expected one label per "
                                    "example (N,) or (N, 1), or a multi-label (N, k)",
                              f"save y_{name} with one label per image")
        if y_shape[0] != shape[0]:
            raise FormatError(path, f"image/label count mismatch: x_{name} has {shape[0]}, "
                                    f"y_{name} has {y_shape[0]}",
                              f"save x_{name} and y_{name} with one label per image")
        check_split_header(shape[0], shape[1:], dtype, path, f"x_{name}")
        size = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if self.fortran and size > FORTRAN_MAX_BYTES:
            raise FormatError(path, f"x_{name} is stored in Fortran (column) order, which "
                                    f"is read whole: {size:,} bytes, more than mnistconv's "
                                    f"limit of {FORTRAN_MAX_BYTES:,}",
                              "save it in C order (np.ascontiguousarray) first")
        super().__init__(name, Header.of(shape[0], schema_of(
            tuple(shape[1:]), dtype, y_dtype, self.width or None,
            label_shape=(self.width,) if self.width else ()), path))
        self._labels = None

    extra_columns: Optional[tuple] = None  # set by read() when extra_<split> is there

    def _archive(self):
        return InputZip(self.path)  # a FIFO or device swapped in since read(): refused

    def extra_fields(self):
        """(extra_columns, extra_<split>) when the file has them (QMNIST's), else None."""
        if self.extra_columns is None:
            return None
        name = f"extra_{self.name}.npy"
        with zip_errors(self.path), self._archive() as archive:
            f, shape, dtype, _ = open_member(archive, name, self.path)
            f.close()
            if len(shape) != 2 or shape[0] != self.header.count or \
                    shape[1] != len(self.extra_columns) or dtype.kind not in "iu":
                raise CorruptData(self.path, f"member {name} has shape {shape} "
                                             f"{dtype.name}, expected {self.header.count} x "
                                             f"{len(self.extra_columns)} integers "
                                             "(one row per example, one column per name "
                                             "in extra_columns)")
            return self.extra_columns, read_member(archive, name, self.path)

    def labels(self):
        if self._labels is None:
            with zip_errors(self.path), self._archive() as archive:
                labels = read_member(
                    archive, self.y_name, self.path,
                    None if self.width else
                    lambda part, first: check_labels(part, self.path, first,
                                                     f"member {self.y_name}: "))
            if self.width and labels.size and labels.max() > 1 or \
                    (labels.dtype.kind == "i" and labels.size and labels.min() < 0
                     and self.width):
                at = np.argwhere((labels > 1) | (labels < 0))[0]
                raise CorruptData(self.path, f"member {self.y_name}[{at[0]}, {at[1]}] is "
                                             f"{labels[tuple(at)].item()}, a multi-label "
                                             "target holds 0 or 1")
            self._labels = labels.reshape(-1) if self.column else labels
        return self._labels

    def batches(self, batch_size=DEFAULT_BATCH):
        labels = self.labels()
        h = self.header
        batch_size = budget.rows(h, batch_size)
        with zip_errors(self.path), self._archive() as archive:
            if self.fortran:  # rare; column-major data cannot be streamed by rows
                images = read_member(archive, self.x_name, self.path)
                for start in range(0, h.count, batch_size):
                    end = start + batch_size
                    yield Batch(np.ascontiguousarray(images[start:end]), labels[start:end],
                                np.arange(start, min(end, h.count), dtype=np.int64))
                return
            f, *_ = open_member(archive, self.x_name, self.path)
            with f:
                yield from row_batches(f, h, labels, batch_size, self.path,
                                        f"member {self.x_name}")


def _read_text_member(archive, name, path, limit):
    """A 1-D '<U<n>' member of at most `limit` names (() when absent)."""
    if name not in archive.namelist():
        return ()
    info = archive.getinfo(name)
    check_sizes(archive, info, path)
    with archive.open(info) as f:
        try:
            shape, fortran, dtype = read_npy_header(f)
        except Exception as e:
            raise CorruptData(path, f"member {name} is not a valid .npy array "
                                    f"({' '.join(str(e).split())})") from None
        if dtype.kind != "U" or len(shape) != 1:
            raise FormatError(path, f"member {name} holds {dtype.str} {shape}, not a list "
                                    "of names", "names are a 1-D '<U' array")
        if shape[0] > limit or dtype.itemsize // 4 > classes.MAX_CLASS_NAME_LENGTH:
            raise OverLimit(path, f"member {name}: {shape[0]} names of up to "
                                    f"{dtype.itemsize // 4} characters are more than "
                                    f"mnistconv reads ({limit} of "
                                    f"{classes.MAX_CLASS_NAME_LENGTH})")
        want = shape[0] * dtype.itemsize
        data = f.read(want)
        if len(data) != want or f.read(1):
            raise CorruptData(path, f"member {name}: its .npy header declares {want} "
                                    "bytes, the member holds others")
    try:
        return tuple(str(x) for x in np.frombuffer(data, dtype))
    except ValueError:
        raise CorruptData(path, f"member {name} holds characters that are not "
                                "Unicode") from None


def _text_array(names):
    """Names as a fixed-width unicode array (at least '<U1')."""
    width = max([1] + [len(n) for n in names])
    return np.array(list(names), dtype=f"<U{width}")


def _split_names(names, path):
    """Split names in Keras' order: train, test, then the rest as stored."""
    xs = [n[2:-4] for n in names if n.startswith("x_") and n.endswith(".npy")]
    ys = {n[2:-4] for n in names if n.startswith("y_") and n.endswith(".npy")}
    for s in xs + sorted(ys - set(xs)):
        # Split names become output file names: x_../../evil.npy must not escape.
        safe_split_name(s, path)
    for s in xs:
        if s not in ys:
            raise FormatError(path, f"has x_{s} but no y_{s}", f"save y_{s} beside x_{s}")
    for s in sorted(ys - set(xs)):
        raise FormatError(path, f"has y_{s} but no x_{s}", f"save x_{s} beside y_{s}")
    if not xs:  # the members' names, printable on one line
        shown = [printable(n[:-4] if n.endswith(".npy") else n, 40) for n in names[:10]]
        listed = ", ".join(shown + (["..."] if len(names) > 10 else []))
        raise FormatError(path, "holds no x_<split>/y_<split> arrays (Keras' layout)",
                          f"it has: {listed or 'nothing'}")
    return in_split_order(xs)


def read(path) -> Dataset:
    """An .npz of x_<split>/y_<split> arrays as a dataset: train, test, then the
    other splits as stored. Only the members' headers are read here.

        ds = read("mnist.npz")
        ds.splits["train"].header.shape      # (28, 28)
    """
    check_input_file(path)
    with zip_errors(path), InputZip(path) as archive:
        names = archive.namelist()
        medmnist = not any(n.startswith("x_") for n in names) and \
            any(f"{k}_images.npy" in names for k in MEDMNIST_SPLITS.values())
        if not medmnist:
            splits = {s: NpzSplit(s, path, archive) for s in _split_names(names, path)}
        class_names = _read_text_member(archive, "class_names.npy", path, classes.MAX_CLASSES)
        columns = _read_text_member(archive, "extra_columns.npy", path, MAX_EXTRA_COLUMNS)
    if medmnist:
        # What write(keys="medmnist") wrote: MedMNIST's keys, read by the MedMNIST
        # reader (one reader for those members), so the npz writer's file reads back
        # with --from npz as well as with --from medmnist or by detection.
        from ..registry import get
        return get("medmnist").load().read(path)
    dataset = Dataset("npz", splits, [path])
    for s, split in splits.items():
        if f"extra_{s}.npy" in names:
            split.extra_columns = columns
    if class_names:
        classes.attach(dataset, classes.check_names(class_names, path), path)
    return dataset


def sniff(path) -> bool:
    """A file that starts as a zip archive does (an npz is one)."""
    return has_magic(path, ZIP_MAGIC)


def _layout_shape(shape, layout, where):
    if layout == "nhw" or (len(shape) == 3 and layout == "nhwc"):
        return tuple(shape)
    if len(shape) == 2:
        return tuple(shape) + (1,) if layout == "nhwc" else (1,) + tuple(shape)
    if len(shape) == 3 and layout == "nchw":
        return (shape[2], shape[0], shape[1])  # channels-last images become channels-first
    raise UsageError(where, f"--layout {layout} needs images of 2 or 3 dimensions, "
                            f"these are {shape}", "choose another --layout", cli_hint="choose another layout")


def _arrange(images, layout, to_float, where):
    """A batch in the requested layout and pixel type."""
    if to_float:
        if images.dtype == np.uint8:
            images = images.astype(np.float32) / np.float32(255)
        else:  # a float type: contract.admit lets no other through (SPEC.holds_when)
            images = images.astype(np.float32)
    if layout == "nchw" and images.ndim == 4:
        return np.ascontiguousarray(np.moveaxis(images, 3, 1))
    n = len(images)
    return np.ascontiguousarray(images).reshape((n,) + _layout_shape(images.shape[1:],
                                                                     layout, where))


def _member(archive, name, compress):
    info = zipfile.ZipInfo(name, date_time=FIXED_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    return archive.open(info, "w", force_zip64=True)


def _write_header(f, shape, dtype):
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
              "shape": tuple(shape)}
    np.lib.format.write_array_header_1_0(f, header)


class NpzWrite(ShardedWrite):
    """The .npz (or '-'), a zip written in one go: a target per split, each adding its
    members to the archive the session holds open on the one staged file; the last
    adds class_names and the extra fields and closes it: only it returns the file.

        mnistconv.write(mnistconv.read("data/mnist"), "mnist.npz", layout="nhwc")
    """

    def __init__(self, dataset, path, options):
        self.medmnist = options.keys == "medmnist"
        if self.medmnist:
            for name in dataset.splits:
                if name not in MEDMNIST_SPLITS:
                    raise UsageError(path, f"MedMNIST's layout holds train, validation "
                                           f"(val) and test, not a split named {name}",
                                     "choose those splits with --split")
        self.dataset, self.options, self.staged = dataset, options, None
        self.splits = list(dataset.splits.values())
        self.targets = [ShardTarget(s.name, 0, str(path), 0, s.header.count)
                        for s in self.splits]

    def stage(self, staged, target):
        """The one staged file, for every split's target."""
        self.staged = self.staged or staged.file(target.path)
        return self.staged

    @contextlib.contextmanager
    def shared(self, records):
        """The archive (and its hashed stream) on the staged file."""
        with open_staged(self.staged) as raw:
            stream = _HashedStream(raw)
            try:
                # (zipfile takes any object with write and tell; its stubs want a file)
                with zipfile.ZipFile(stream, "w", allowZip64=True) as archive:  # type: ignore[call-overload]
                    yield archive, stream
            except BaseException:
                stream.abandon()
                raise

    def write_shard(self, index, staged_path):
        """Split `index`'s members: ([] or, the last, [OutputFile], Counters)."""
        (archive, stream), split, o = self.pool, self.splits[index], self.options
        names = (f"{MEDMNIST_SPLITS[split.name]}_images.npy",
                 f"{MEDMNIST_SPLITS[split.name]}_labels.npy") if self.medmnist else \
            (f"x_{split.name}.npy", f"y_{split.name}.npy")
        _write_split(archive, split, o, names, self.progress)
        if index < len(self.splits) - 1:
            return [], Counters(split.header.count)
        if not self.medmnist:  # MedMNIST's files hold nothing else
            _write_extras(archive, self.dataset, o.compress)
        archive.close()
        return [OutputFile(self.targets[0].path, stream.size, stream.finish())], \
            Counters(split.header.count)


prepare_write = NpzWrite


class _HashedStream:
    """The output file as zipfile sees it: tell() but no seek(), so every byte is final
    when written and is hashed on the way, on a second thread (SHA-256, the CRC and the
    write all release the GIL). The hand-over is a SimpleQueue: no Python-level lock a
    Ctrl-C could leave held (queue.Queue hung once), and no polling thread taking the
    GIL from a slow producer (see benchmarks/)."""

    MAX_PENDING = 2  # hashing outruns the CRC and write beside it; more only holds memory
    POLL = 0.0005  # the writer's wait when MAX_PENDING items are queued

    def __init__(self, file):
        self.file, self.size, self._error, self._abandoned = file, 0, None, False
        self._hash = hashlib.sha256()
        self._pending = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="npz-sha256", daemon=True)
        self._thread.start()

    def _run(self):
        while (data := self._pending.get()) is not None:
            try:
                self._hash.update(data)
            except BaseException as e:
                self._error = e
                return

    def write(self, data):
        if self._abandoned:  # a ZipFile left half-closed by a signal retries at exit
            return memoryview(data).nbytes
        # Queued by reference: zipfile writes bytes or a batch's array, never changed after.
        self.file.write(data)
        while self._pending.qsize() >= self.MAX_PENDING and self._error is None:
            time.sleep(self.POLL)
        self._pending.put(data)
        n = memoryview(data).nbytes
        self.size += n
        return n

    def tell(self):
        return self.size

    def flush(self):
        if not self._abandoned:  # (zipfile's end record, flushed when it is collected)
            self.file.flush()

    def finish(self):
        """The SHA-256 of everything written (waits for the hashing thread)."""
        self._pending.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._hash.hexdigest()

    def abandon(self):
        """The write failed: let the thread end without waiting for it; later writes
        (zipfile closing the archive when it is collected) go nowhere."""
        self._abandoned = True
        self._pending.put(None)


def _write_array(archive, name, array, compress):
    with _member(archive, name, compress) as f:
        _write_header(f, array.shape, array.dtype)
        f.write(np.ascontiguousarray(array).tobytes())


def _write_extras(archive, dataset, compress):
    """class_names and the splits' extra fields, after the splits, when there are some."""
    names = next((s.header.class_names for s in dataset.splits.values()
                  if s.header.class_names), ())
    if names:
        _write_array(archive, "class_names.npy", _text_array(names), compress)
    columns = None
    for split in dataset.splits.values():
        extra = extra_fields(split)
        if extra is None:
            continue
        columns, table = extra
        if len(table) != split.header.count:
            raise CorruptData(split.header.source, f"has {len(table)} rows of extra fields "
                                                   f"for {split.header.count} examples")
        _write_array(archive, f"extra_{split.name}.npy", table, compress)
    if columns is not None:
        _write_array(archive, "extra_columns.npy", _text_array(columns), compress)


def _write_split(archive, split, options, names, progress):
    """The split's members `names` (images, labels) with the write's options."""
    compress, layout, to_float = options.compress, options.layout, options.to_float
    h = split.header
    dtype = np.dtype(np.float32) if to_float else h.dtype
    shape = (h.count,) + _layout_shape(h.shape, layout, h.source)
    labels = []
    with _member(archive, names[0], compress) as f:
        _write_header(f, shape, dtype)
        for batch in iter_batches(split, progress, split.name):
            # The array's own memory, not a .tobytes() copy: zipfile takes any buffer.
            f.write(_arrange(batch.images, layout, to_float, h.source).reshape(-1)
                    .view(np.uint8))
            labels.append(batch.labels)
    y = np.concatenate(labels) if labels else np.zeros(0, h.label_dtype)
    if len(y) != h.count:
        raise CorruptData(h.source, f"yielded {len(y)} examples, its header says {h.count}")
    if (options.label_column or options.keys == "medmnist") and y.ndim == 1:
        y = y.reshape(-1, 1)  # class labels as (N, 1)
    _write_array(archive, names[1], y, compress)

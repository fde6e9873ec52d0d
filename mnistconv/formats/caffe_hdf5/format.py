"""HDF5 for Caffe's HDF5Data layer (caffe/src/caffe/layers/hdf5_data_layer.cpp): its
`hdf5_data_param.source` is a text file of HDF5 file names; from each file it reads one
dataset per top blob, named after the top, N first, as float, one whole file at a time.

Layout written, per split:
  <split>.h5   dataset `data`  N x C x H x W (C = 1 for grayscale), row-major:
                 float32 in [0, 1] (pixel / 255) by default; float32 0..255 with
                 no_scale; uint8 0..255 with pixel_type="uint8".
               dataset `label` N float32 (the class number)
               both chunked (about CHUNK_BYTES of rows per chunk); with compress,
               through HDF5's shuffle and deflate (level 4) filters.
  <split>.txt  the list file for `source`: the absolute path of each .h5, one a line
               (Caffe opens entries from the directory it runs in).
A split whose `data` exceeds MAX_BLOB_BYTES (one Caffe blob) is cut into
`<split>-00000-of-0000N.h5` ..., all listed in `<split>.txt`. Float pixels made from
uint8 ones carry the attribute `mnistconv_uint8_scale` on `data` (255, or 1 with
no_scale; Caffe ignores it), so the reader gives back the original uint8 pixels.

Reads a list file, an .h5 file, or a directory of list files (else of .h5 files). A
list's entries must name files in the list's folder (or below it). Each file must hold
`data` (N x H x W or N x C x H x W) and `label` (N or N x 1, whole numbers) stored in
the file itself (no links, external storage or virtual datasets). Pixels come back in
the stored type, labels as uint8 when they fit, else int32. No timestamps are stored.
"""

import contextlib
import glob
import hashlib
import os
import re

import numpy as np

from ...errors import (CannotWrite, CorruptData, FormatError, MnistconvError,
    NotFound, OverLimit, UsageError, WrongFormat, optional_import)
from ...io.fileio import GZIP_MAX_RATIO, has_magic, \
    input_entries, library_path, open_input, open_staged, own_file_size, sha256_file
from ...io import budget
from ...limits import MAX_SHARDS, printable, safe_split_name
from ...model.records import (DEFAULT_BATCH, Batch, Dataset, Header, OutputFile,
                        Split, iter_batches)
from ...io.shards import in_split_order, is_data_name, shard_bounds
from ..common import InOrder
from ..contract import Counters, ShardTarget, ShardedWrite
from ...model.stream import RangeSplit

HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
MAX_BLOB_BYTES = (1 << 31) - 1
CHUNK_BYTES = 1 << 20
LEVEL = 4
EXTENSIONS = (".h5", ".hdf5")
_SUFFIX = re.compile(r"\.(h5|hdf5|txt)$", re.I)
_SHARD = re.compile(r"-\d{5}-of-\d{5}$")
MAX_LIST_BYTES = 1 << 20
SCALE_ATTRIBUTE = "mnistconv_uint8_scale"


def _h5py():
    return optional_import("h5py", "caffe", "Caffe's HDF5 format")


def _list_entries(path):
    """The names in a list file (small UTF-8 text naming .h5 files), else None."""
    try:
        if not os.path.isfile(path):
            return None
        with open_input(path) as f:  # inside the tree: the caller's input_entries
            if os.fstat(f.fileno()).st_size > MAX_LIST_BYTES:
                return None
            words = f.read().decode("utf-8").split()
    except (OSError, UnicodeDecodeError, MnistconvError):
        return None
    return words if words and all(w.lower().endswith(EXTENSIONS) for w in words) else None


def _stem(path):
    return _SHARD.sub("", _SUFFIX.sub("", os.path.basename(str(path))))


def _resolve(entry, list_path):
    """The file a list entry names (relative: from the list's folder, else the current
    one, as Caffe opens it), which must be in the list's folder or below."""
    folder = os.path.dirname(list_path) or os.curdir
    candidates = [entry] if os.path.isabs(entry) else [os.path.join(folder, entry), entry]
    found = next((c for c in candidates if os.path.isfile(c)), None)
    named = printable(entry, 240)  # a path: its end says most
    if found is None:
        raise FormatError(list_path, f"names {named}, which is not a file in the list's "
                                     "folder", "fix the list, or put the file beside it")
    root = os.path.realpath(folder)
    # The entry's target, links resolved: an entry that is a link out is outside too.
    if os.path.commonpath([root, os.path.realpath(found)]) != root:
        raise FormatError(list_path, f"names {named}, which is outside the list's folder",
                          "mnistconv reads only .h5 files in their list's folder: list "
                          "them by name (train.h5), or move them beside the list")
    return found


def _sources(path):
    """[(split name, [h5 paths])] for a list file, an .h5 file or a directory."""
    if os.path.isfile(path):
        if has_magic(path, HDF5_MAGIC):
            return [(_stem(path), [path])]
        entries = _list_entries(path)
        if entries is None:
            raise WrongFormat(path, "is neither an HDF5 file nor a list of .h5 files")
        return [(_stem(path), [_resolve(e, path) for e in entries])]
    found = {}
    for n in _names(path):
        entries = _list_entries(os.path.join(path, n)) if n.lower().endswith(".txt") else None
        if entries:
            found[_stem(n)] = [_resolve(e, os.path.join(path, n)) for e in entries]
    if not found:
        for n in _names(path):
            if n.lower().endswith(EXTENSIONS) and has_magic(os.path.join(path, n), HDF5_MAGIC):
                found.setdefault(_stem(n), []).append(os.path.join(path, n))
    if not found:
        raise FormatError(path, "holds no HDF5 list file (<split>.txt) nor .h5 file",
                          "check the path, or name the .h5 file")
    return [(s, found[s]) for s in in_split_order(found)]


def _names(folder):
    return [os.path.basename(e) for e in input_entries(folder, folder, is_data_name)]


def _dataset(f, name, path, h5py):
    link = f.get(name, getlink=True)
    if link is None:
        raise FormatError(path, f"has no dataset '{name}'",
                          "HDF5Data reads datasets named after its tops: data and label")
    if not isinstance(link, h5py.HardLink):
        raise FormatError(path, f"'{name}' is a {type(link).__name__} to elsewhere",
                          "mnistconv reads datasets stored in the file itself")
    dset = f[name]
    if not isinstance(dset, h5py.Dataset):
        raise WrongFormat(path, f"'{name}' is a group, not a dataset")
    if dset.external or dset.is_virtual:
        raise FormatError(path, f"'{name}' is stored outside the file (external storage "
                                "or a virtual dataset)",
                          "mnistconv reads datasets stored in the file itself")
    if dset.dtype.kind not in "biuf" or dset.dtype.names is not None:
        raise WrongFormat(path, f"'{name}' holds {dset.dtype}, not numbers")
    stored, claimed = dset.id.get_storage_size(), dset.size * dset.dtype.itemsize
    if claimed > stored * (GZIP_MAX_RATIO if dset.compression else 1):
        raise CorruptData(path, f"'{name}' claims {claimed:,} bytes of {dset.shape} and "
                                f"stores {stored:,}, which cannot be")
    if dset.chunks:
        # HDF5 decodes a whole chunk to read any row of it, whatever its filter.
        chunk = budget.image_bytes(dset.chunks, dset.dtype)
        if chunk > budget.BATCH_BYTES:
            raise FormatError(path, f"'{name}' is stored in chunks of {chunk:,} bytes, more "
                                    f"than mnistconv's memory budget of "
                                    f"{budget.BATCH_BYTES:,} per batch",
                              "rechunk it, e.g. h5repack -l CHUNK=1024x1x28x28")
    return dset


class _File:
    """One HDF5 file's data and label datasets, checked (the file stays closed)."""

    def __init__(self, path, h5py):
        self.path = path
        with _open(path, h5py) as f:
            data, label = _dataset(f, "data", path, h5py), _dataset(f, "label", path, h5py)
            if data.ndim not in (3, 4):
                raise FormatError(path, f"'data' has shape {data.shape}", "expected N x H x W "
                                        "or N x C x H x W")
            if label.ndim not in (1, 2) or (label.ndim == 2 and label.shape[1] != 1):
                raise FormatError(path, f"'label' has shape {label.shape}", "expected N "
                                        "(one class number per example) or N x 1")
            if data.shape[0] != label.shape[0]:
                raise FormatError(path, f"'data' has {data.shape[0]:,} rows and 'label' "
                                        f"{label.shape[0]:,}", "they must match")
            self.count = data.shape[0]
            c, rest = (data.shape[1], data.shape[2:]) if data.ndim == 4 else (1, data.shape[1:])
            self.chw = (c,) + tuple(rest)
            self.shape = tuple(rest) if c == 1 else tuple(rest) + (c,)
            self.scale = _uint8_scale(data, path)
            self.source_dtype = data.dtype.newbyteorder("=")
            self.dtype = data.dtype.newbyteorder("=") if self.scale is None else np.dtype(np.uint8)
            # Checked against the budget by _dataset(); batches() caches one chunk.
            self.chunk_bytes = budget.image_bytes(data.chunks, data.dtype) if data.chunks \
                else 0


def _uint8_scale(data, path):
    """The attribute mnistconv's writer puts on float pixels made from uint8 ones."""
    scale = data.attrs.get(SCALE_ATTRIBUTE)
    if scale is None or data.dtype.kind != "f":
        return None
    try:
        scale = float(np.asarray(scale).reshape(-1)[0])
    except (TypeError, ValueError, IndexError):
        scale = 0
    if not 1 <= scale <= 255:
        raise CorruptData(path, f"'data' has attribute {SCALE_ATTRIBUTE} "
                                f"{printable(data.attrs.get(SCALE_ATTRIBUTE))}, not a "
                                "number from 1 to 255")
    return scale


def _kind(f):
    return f.dtype.name if f.scale is None else f"uint8 / {f.scale:g} as float"


@contextlib.contextmanager
def _open(path, h5py, chunk_cache=None):
    """The file open for reading; what HDF5 raises from damaged structures is CorruptData.
    chunk_cache: bytes of decoded chunks HDF5 keeps (None: its default of 1 MiB, which
    holds no large chunk, so every batch in one would decode the whole chunk again)."""
    try:  # confined by _sources; a FIFO or link swapped in is refused
        with library_path(path) as guarded:
            f = h5py.File(guarded, "r", rdcc_nbytes=chunk_cache)
    except OSError as e:
        raise WrongFormat(path, f"is not a readable HDF5 file ({e})") from None
    try:
        with f:
            yield f
    except MnistconvError:
        raise
    except (OSError, RuntimeError, ValueError, KeyError) as e:
        raise CorruptData(path, f"HDF5 cannot read it ({e})") from None


class Hdf5Split(InOrder, Split):
    """The files of one list, in order: checked and labels read here."""

    def __init__(self, name, paths, source):
        h5py = _h5py()
        if len(paths) > MAX_SHARDS:
            raise OverLimit(source, f"lists {len(paths):,} files, more than mnistconv's "
                                      f"limit of {MAX_SHARDS:,}")
        self.files = [_File(p, h5py) for p in paths]
        first = self.files[0]
        for f in self.files[1:]:
            if (f.chw, f.dtype, f.scale) != (first.chw, first.dtype, first.scale):
                raise FormatError(f.path, f"'data' is {_kind(f)} {f.chw} per example, "
                                          f"{first.path} is {_kind(first)} {first.chw}",
                                  "the files of one split must agree")
        count = sum(f.count for f in self.files)
        from ...codecs.classes import check_labels
        from ...codecs.images import check_split_header
        check_split_header(count, first.shape, first.dtype, source, "'data'")
        parts, done = [], 0
        for f in self.files:
            with _open(f.path, h5py) as h:
                labels = np.asarray(h["label"][...]).reshape(-1)
            check_labels(labels.astype(labels.dtype.newbyteorder("=")), f.path, done,
                         "'label': ")
            # float(): a float16 compared with -2**31 warns of an overflow
            if len(labels) and float(labels.min()) < -(1 << 31):  # int32 below would wrap
                i = int(np.argmin(labels))
                raise FormatError(f.path, f"'label': label {labels[i].item()!r} of example "
                                          f"{done + i} is not a class number",
                                  "labels below -2,147,483,648 do not fit int32")
            parts.append(labels)
            done += len(labels)
        labels = np.concatenate(parts) if parts else np.zeros(0, np.float32)
        small = not len(labels) or (labels.min() >= 0 and labels.max() <= 255)
        self._labels = labels.astype(np.uint8 if small else np.int32)
        super().__init__(name, Header(count, first.shape, first.dtype, self._labels.dtype,
                                      None, source))

    def labels(self):
        return self._labels

    def batches(self, batch_size=DEFAULT_BATCH):
        h5py = _h5py()
        # Counted by what a batch makes on its way, not by its output: the stored
        # dtype (float32 read for uint8 out), and float64 while a scale is undone.
        made = max(np.dtype(f.source_dtype).itemsize + (0 if f.scale is None else 8)
                   for f in self.files)
        made = max(made, np.dtype(self.header.dtype).itemsize)
        batch_size = budget.rows_for(self.header.shape, np.dtype(f"V{made}"), batch_size)
        done = 0
        for f in self.files:
            with _open(f.path, h5py, f.chunk_bytes + (1 << 20)) as h:
                data = h["data"]
                for start in range(0, f.count, batch_size):
                    end = min(start + batch_size, f.count)
                    try:
                        rows = data[start:end]
                    except (OSError, ValueError) as e:
                        raise CorruptData(f.path, f"'data' rows {start}..{end - 1} cannot "
                                                  f"be read ({e})") from None
                    rows = rows.reshape((end - start,) + f.chw)
                    if f.scale is not None:  # uint8 back from floats the writer scaled
                        wide = rows.astype(np.float64)
                        wide *= f.scale
                        rows = np.rint(wide, out=wide)
                        if len(rows) and (rows.min() < 0 or rows.max() > 255):
                            raise CorruptData(f.path, f"'data' rows from {start}: values "
                                                      f"times {SCALE_ATTRIBUTE} "
                                                      f"{f.scale:g} leave 0..255")
                    rows = rows.astype(f.dtype, copy=False)
                    images = rows[:, 0] if f.chw[0] == 1 else np.moveaxis(rows, 1, 3)
                    yield Batch(np.ascontiguousarray(images),
                                self._labels[done + start:done + end],
                                np.arange(done + start, done + end, dtype=np.int64))
            done += f.count


def read(path) -> Dataset:
    """HDF5Data inputs as a dataset: a list file (<split>.txt) or an .h5 file is one
    split, named by the file; a directory holds one split per list file.

        ds = read("caffe-h5/")                 # caffe-h5/train.txt, caffe-h5/test.txt
        ds.splits["train"].header.shape        # (28, 28)
    """
    path = str(path)
    if not os.path.exists(path):
        raise NotFound(path, "no such file or directory")
    sources = _sources(path)
    splits = {safe_split_name(name, path, "split name (from the file name)"):
              Hdf5Split(name, paths, path) for name, paths in sources}
    return Dataset("caffe-hdf5", splits, [p for _, ps in sources for p in ps])


def sniff(path) -> bool:
    """An HDF5 file, a list of .h5 files, or a directory holding either."""
    path = str(path)
    if os.path.isfile(path):
        return has_magic(path, HDF5_MAGIC) or _list_entries(path) is not None
    return os.path.isdir(path) and any(
        (n.lower().endswith(".txt") and _list_entries(os.path.join(path, n)))
        or (n.lower().endswith(EXTENSIONS) and has_magic(os.path.join(path, n), HDF5_MAGIC))
        for n in _names(path))


def _file_names(folder, stem, count, row_bytes):
    """The .h5 files of a split and the rows each ends at (several over MAX_BLOB_BYTES)."""
    rows = max(1, MAX_BLOB_BYTES // max(row_bytes, 1))
    n = max(1, -(-count // rows))
    if n == 1:
        return [os.path.join(folder, stem + ".h5")], [count]
    if n > MAX_SHARDS:
        raise CannotWrite(folder, f"split {stem} would need {n:,} files")
    return ([os.path.join(folder, f"{stem}-{i:05d}-of-{n:05d}.h5") for i in range(n)],
            shard_bounds(count, n))


def _pixels(images, pixel_type, scale):
    """A batch as N x C x H x W in the stored type, C-contiguous, made as one float32
    array scaled in place: astype() of the channels-first view kept the channels-last
    layout, the division made a second array and h5py a contiguous third, four times
    the batch's pixels each (benchmarks/README.md, bench_medmnist224)."""
    images = images[:, None] if images.ndim == 3 else np.moveaxis(images, 3, 1)
    if pixel_type == "uint8":
        return np.ascontiguousarray(images)
    out = np.empty(images.shape, np.float32)
    out[...] = images
    if images.dtype == np.uint8 and scale:
        np.divide(out, np.float32(255), out=out)
    return out


class _Sink:
    """A staged file as HDF5 writes it (h5py's fileobj driver). A write that fails (a
    full disk, a file size limit) is kept, HDF5's later writes go into nothing, and the
    error is raised once HDF5 has closed the file: an HDF5 file whose close failed
    part-way crashed the interpreter at exit (h5py 3.14, HDF5 1.14)."""

    def __init__(self, path):
        self.file = open_staged(path)
        self.error = None
        # HDF5 reads back what it wrote (a chunk evicted from its cache).
        self.read, self.seek, self.tell = self.file.read, self.file.seek, self.file.tell

    def _guarded(self, method, *args):
        if self.error is None:
            try:
                return method(*args)
            except OSError as e:
                self.error = e
        return None

    def write(self, data):
        written = self._guarded(self.file.write, data)
        return memoryview(data).nbytes if written is None else written

    def truncate(self, size=None):  # HDF5 sets the file's length when it closes it
        return self._guarded(self.file.truncate, size)

    def flush(self):
        self._guarded(self.file.flush)

    def close(self):
        self._guarded(self.file.close)
        if self.error is not None:
            raise self.error


def _write_file(h5py, staged, split, rows, options, progress):
    """One .h5 file of `rows` examples, split's, at staged (its records, in order)."""
    h = split.header
    chw = (1,) + tuple(h.shape) if len(h.shape) == 2 else (h.shape[2], h.shape[0], h.shape[1])
    dtype = np.dtype(np.uint8 if options.pixel_type == "uint8" else np.float32)
    scale = (1.0 if options.no_scale else 255.0) \
        if h.dtype == np.uint8 and options.pixel_type != "uint8" else None
    filters = {"compression": "gzip", "compression_opts": LEVEL, "shuffle": True} \
        if options.compress else {}
    sink = _Sink(staged)
    file = h5py.File(sink, "w", libver="earliest", track_order=False)
    try:
        per_chunk = max(1, min(max(rows, 1), CHUNK_BYTES // (dtype.itemsize *
                                                             int(np.prod(chw)))))
        # An empty split: HDF5 takes a chunk larger than the data only if it may grow.
        grows = {"maxshape": (None,) + chw} if rows == 0 else {}
        data = file.create_dataset("data", (rows,) + chw, dtype, chunks=(per_chunk,) + chw,
                                   track_times=False, **grows, **filters)
        if scale is not None:
            data.attrs[SCALE_ATTRIBUTE] = np.float32(scale)
        label = file.create_dataset(
            "label", (rows,), np.float32, chunks=(max(1, min(rows, 1 << 16)),),
            track_times=False, **({"maxshape": (None,)} if rows == 0 else {}), **filters)
        at = 0
        # Batches counted at the stored type's size: a float32 batch is made from each
        # (4 bytes a pixel), so one of the reader's uint8 batches would make 4 x BATCH_BYTES.
        rows_made = budget.rows_for(h.shape, dtype)
        for batch in iter_batches(split, progress, split.name, rows_made):
            if at + len(batch) <= rows:
                data[at:at + len(batch)] = _pixels(batch.images, options.pixel_type,
                                                   not options.no_scale)
                label[at:at + len(batch)] = batch.labels.astype(np.float32)
            if sink.error is not None:
                raise sink.error
            at += len(batch)
        if at != rows:
            raise CorruptData(h.source, f"yielded {at} examples, its header says {rows}")
    except BaseException:  # HDF5 finishes into nothing
        file.close()
        with contextlib.suppress(OSError):
            sink.close()
        raise
    file.close()
    sink.close()


def _earlier(folder, stem, targets):
    """Earlier files of the split under other names: they go on commit."""
    pattern = os.path.join(glob.escape(folder), glob.escape(stem))
    return [old for old in glob.glob(pattern + ".h5") + glob.glob(pattern + "-?????-of-?????.h5")
            if os.path.abspath(old) not in map(os.path.abspath, targets)]


class Hdf5Write(ShardedWrite):
    """Per split, a target per .h5 file (one unless the split is larger than a Caffe
    blob), then its list file; files are reported as named, listed by absolute path
    (Caffe's working directory varies). Options: see the module docstring.

        mnistconv.write(mnistconv.read("data/mnist"), "caffe-h5/", compress=True)
    """

    def __init__(self, dataset, path, options):
        self.h5py, self.options, path = _h5py(), options, str(path)
        splits = list(dataset.splits.values())
        one_file = path.lower().endswith(EXTENSIONS)
        if one_file and len(splits) != 1:
            raise UsageError(path, f"one .h5 file holds one split; this dataset has "
                                   f"{len(splits)} ({', '.join(dataset.splits)})",
                             "name a directory for one <split>.h5 each, or choose a split "
                             "with --split")
        for split in splits:
            safe_split_name(split.name, path)
        self.splits, self.lists, self.targets, self.stale = dataset.splits, {}, [], []
        for split in splits:
            h = split.header
            folder, stem = (os.path.dirname(path), os.path.basename(path)[
                :-len(os.path.splitext(path)[1])]) if one_file else (path, split.name)
            row_bytes = int(np.prod(h.shape)) * (1 if options.pixel_type == "uint8" else 4)
            files, bounds = _file_names(folder, stem, h.count, row_bytes)
            if one_file and len(files) == 1:
                files = [path]
            self.stale += _earlier(folder, stem, files)
            self.targets += [ShardTarget(split.name, i, f, a, b) for i, (f, a, b) in
                             enumerate(zip(files, [0] + bounds[:-1], bounds))]
            self.lists[len(self.targets)] = "".join(os.path.abspath(f) + "\n" for f in files)
            self.targets.append(ShardTarget(split.name, len(files),  # (0..0: no examples)
                                            os.path.join(folder, stem + ".txt"), 0, 0))

    def write_shard(self, index, staged_path):
        t = self.targets[index]
        if index in self.lists:
            text = self.lists[index].encode("utf-8")
            with open_staged(staged_path) as f:
                f.write(text)
            return OutputFile(t.path, len(text), hashlib.sha256(text).hexdigest()), Counters()
        split = self.splits[t.split]
        if (t.start, t.stop) != (0, split.header.count):
            split = RangeSplit(split, t.start, t.stop)
        _write_file(self.h5py, staged_path, split, t.stop - t.start, self.options,
                    self.progress)
        return OutputFile(t.path, own_file_size(staged_path), sha256_file(staged_path)), \
            Counters(t.stop - t.start)


prepare_write = Hdf5Write

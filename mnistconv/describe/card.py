"""A dataset card: one self-contained HTML page (card_html.py draws it) with, per split,
the count, the first images, histogram and mean image of each class and pixel
statistics; the files with sizes and SHA-256; for a conversion, its input, options and
the writer's figures. The figures come from the batches a writer already reads
(observe()) or from one pass of their own (collect()), in bounded memory: a sum per
class, the first SAMPLES images of each class, and the batch in hand.
"""

import os

import numpy as np

from ..model.records import DEFAULT_BATCH, Dataset, WrappedSplit

SAMPLES = 8  # images shown per class
# A kept sample is at most this many pixels (a larger image is kept every k-th row and
# column), and all samples of a split at most SAMPLE_BYTES: the card keeps thumbnails,
# drawn from the memory budget, not full-size images (8 of 4096 x 4096 per class were
# gigabytes).
SAMPLE_PIXELS = 256 * 256
SAMPLE_BYTES = 8 << 20
MAX_MEAN_PIXELS = 1 << 23  # classes x pixels of float64 sums kept for mean images
MAX_FILES_LISTED = 100
_BLOCK = 512  # rows squared at a time


class SplitStats:
    """What the card shows of one split, accumulated a batch at a time."""

    shown = SAMPLES  # images kept per class

    def __init__(self, name, header, jpeg_quality=None):
        self.name, self.header = name, header
        # A JPEG write: counted as the output holds them, encoded and decoded back.
        self.jpeg_quality = jpeg_quality
        self.reset()

    def reset(self):
        """Start over (a writer reading the split a second time)."""
        self.count = 0
        self.class_counts = np.zeros(0, np.int64)
        self.sums = None  # classes x pixels, float64
        self.samples = {}  # label -> list of images (display uint8)
        self.sample_bytes = 0  # what the samples hold (SAMPLE_BYTES at most)
        self.pixel_sum = self.pixel_sq = 0.0
        self.pixel_min, self.pixel_max = None, None
        self.means_dropped = False

    def add(self, images, labels):
        """Take in a batch: images as the split yields them, labels one per image."""
        from ..views.view import to_gray_uint8
        labels = np.asarray(labels)
        if labels.ndim > 1:  # extra label columns: the class is the first
            labels = labels[:, 0]
        labels = labels.astype(np.int64)
        n = len(labels)
        if not n:
            return
        images = np.asarray(images)
        if self.jpeg_quality is not None and images.ndim == 3 and images.dtype == np.uint8:
            from ..codecs import encode_jpeg_batch
            images = encode_jpeg_batch(images, self.jpeg_quality, decoded=True)[1]
        self.count += n
        classes = max(int(labels.max()) + 1, len(self.class_counts))
        counts = np.bincount(labels, minlength=classes)
        self.class_counts = np.pad(self.class_counts, (0, classes - len(self.class_counts))) + counts
        low, high = images.min(), images.max()
        self.pixel_min = low if self.pixel_min is None else min(self.pixel_min, low)
        self.pixel_max = high if self.pixel_max is None else max(self.pixel_max, high)
        rows = images.reshape(n, -1)
        present = np.flatnonzero(counts).tolist()
        # Integer sums of 8-bit pixels (no float copy of a batch), squares a block at a time.
        self._add_means(rows, labels, present, classes)
        for start in range(0, n, _BLOCK):
            self.pixel_sq += _squares(rows[start:start + _BLOCK])
        for label in present:
            have = self.samples.setdefault(label, [])
            if len(have) < SAMPLES and self.sample_bytes < SAMPLE_BYTES:
                for i in np.flatnonzero(labels == label)[:SAMPLES - len(have)].tolist():
                    # Shrunk before it is converted: no full-size copy of the image.
                    # A copy: a view would keep the whole batch alive.
                    small = to_gray_uint8(_thumbnail(images[i])[None])[0].copy()
                    if self.sample_bytes + small.nbytes > SAMPLE_BYTES:
                        break
                    have.append(small)
                    self.sample_bytes += small.nbytes

    def _add_means(self, rows, labels, present, classes):
        """Add a batch's rows to the sums of their classes (and the pixel sum)."""
        if self.means_dropped or classes * rows.shape[1] > MAX_MEAN_PIXELS:
            self.means_dropped, self.sums = True, None
            # One total, no per-pixel sums of a batch (a row of 16 M float64 each).
            wide = np.uint64 if rows.dtype == np.uint8 else np.float64
            self.pixel_sum += float(rows.sum(dtype=wide))
            return
        if self.sums is None or len(self.sums) < classes:
            old = self.sums if self.sums is not None else np.zeros((0, rows.shape[1]))
            self.sums = np.pad(old, ((0, classes - len(old)), (0, 0)))
        for label in present:
            part = _column_sums(rows.take(np.flatnonzero(labels == label), axis=0))
            self.sums[label] += part
            self.pixel_sum += float(part.sum())

    def means(self):
        """{label: mean image (display uint8)} of the classes present, or {}."""
        if self.sums is None:
            return {}
        from ..views.view import to_gray_uint8
        shape = tuple(self.header.shape)
        # Shrunk as the samples are: the page draws them all in one size.
        return {label: to_gray_uint8(_thumbnail(np.round(self.sums[label] / n).clip(0, 255)
                                                .astype(np.uint8).reshape(shape))[None])[0]
                for label, n in enumerate(self.class_counts.tolist()) if n}

    def pixel_stats(self):
        """{min, max, mean, std} over every pixel value of the split."""
        values = self.count * int(np.prod(self.header.shape) or 1)
        if not values:
            return {}
        mean = self.pixel_sum / values
        std = max(0.0, self.pixel_sq / values - mean * mean) ** 0.5
        return {"min": _number(self.pixel_min), "max": _number(self.pixel_max),
                "mean": round(mean, 4), "std": round(std, 4)}


def _thumbnail(image):
    """An image (H x W or H x W x C) as every k-th row and column, k the least that
    brings it to SAMPLE_PIXELS (a view, nothing copied); flat vectors as they are."""
    if image.ndim < 2:
        return image
    pixels = int(image.shape[0]) * int(image.shape[1])
    k = 1
    while pixels > SAMPLE_PIXELS * k * k:
        k += 1
    return image[::k, ::k] if k > 1 else image


def _column_sums(rows):
    """Each pixel's sum over the rows, exact in integers for 8-bit pixels."""
    if rows.dtype == np.uint8:
        wide = np.uint32 if len(rows) < (1 << 24) else np.uint64
        return rows.sum(0, dtype=wide).astype(np.float64)
    return rows.sum(0, dtype=np.float64)


def _squares(rows) -> float:
    """The sum of the squared pixel values (8-bit pixels in integers that cannot overflow)."""
    if rows.dtype == np.uint8:
        squared = rows.astype(np.uint16)
        np.multiply(squared, squared, out=squared)
        if rows.shape[1] < (1 << 16):
            return float(squared.sum(1, dtype=np.uint32).sum(dtype=np.uint64))
        return float(squared.sum(dtype=np.uint64))
    wide = rows.astype(np.float64)
    return float(np.dot(wide.ravel(), wide.ravel()))


def _number(value):
    value = value.item() if hasattr(value, "item") else value
    return round(value, 4) if isinstance(value, float) else value


class _Observed(WrappedSplit):
    """The base split, its batches counted into a SplitStats on their way to the writer."""

    def __init__(self, base, stats):
        super().__init__(base)
        self.stats = stats

    def batches(self, batch_size=DEFAULT_BATCH):
        from concurrent.futures import ThreadPoolExecutor
        self.stats.reset()
        # Counted on a thread while the writer works on the batch (numpy frees the GIL).
        with ThreadPoolExecutor(1, thread_name_prefix="mnistconv-card") as counting:
            for batch in self.base.batches(batch_size):
                counted = counting.submit(self.stats.add, batch.images, batch.labels)
                yield batch
                counted.result()


def jpeg_quality(writer_name, options):
    """The JPEG quality a write encodes its images at, or None for an exact write: the
    card beside it counts the pixels the output holds, not the input's."""
    from ..limits import DEFAULT_JPEG_QUALITY
    image_format = options.get("image_format")
    if image_format is None and writer_name == "tfrecord":
        from ..codecs.example import PRESETS
        image_format = PRESETS[options.get("preset") or "recipe"].image_format
    if image_format != "jpeg":
        return None
    quality = options.get("jpeg_quality")
    return DEFAULT_JPEG_QUALITY if quality is None else quality


def observe(dataset, jpeg_quality=None):
    """(a dataset whose splits fill SplitStats as a writer reads them, {name: stats});
    complete() them after the write. jpeg_quality: the write's, if it writes JPEGs."""
    stats = {name: SplitStats(name, split.header, jpeg_quality)
             for name, split in dataset.splits.items()}
    splits = {name: _Observed(split, stats[name]) for name, split in dataset.splits.items()}
    return Dataset(dataset.format, splits, dataset.paths, dataset.notes), stats


def complete(stats, dataset):
    """A pass of its own for any split the writer did not read whole (take(), an early stop)."""
    for name, split in dataset.splits.items():
        if stats[name].count != split.header.count:
            stats[name] = collect_split(split, stats[name].jpeg_quality)
    return stats


def collect_split(split, jpeg_quality=None) -> SplitStats:
    """One pass over a split."""
    stats = SplitStats(split.name, split.header, jpeg_quality)
    for batch in split.batches():
        stats.add(batch.images, batch.labels)
    return stats


def collect(dataset) -> dict:
    """{split name: SplitStats}, one pass over each split."""
    return {name: collect_split(split) for name, split in dataset.splits.items()}


def input_files(dataset):
    """file_rows of the files a dataset was read from (all under a directory it names),
    listed and read through the guard as the readers list and read them: hidden names
    left out, a link leaving the tree, a FIFO or a device refused."""
    from ..io.fileio import input_files_under, input_root
    paths = []
    for path in dataset.paths:
        root = input_root(path)
        if os.path.isdir(path):
            paths += [(p, root) for p in input_files_under(path, root)]
        elif os.path.lexists(path):
            paths.append((path, None))  # named by the user: read as named
    return file_rows(paths)


def file_rows(paths, known=None):
    """Rows (path, bytes, sha256) of at most MAX_FILES_LISTED files, then the number and
    bytes of the rest; paths: (path, root) pairs, read through the guard; known:
    {path: (bytes, sha256)} a write recorded."""
    from ..io.fileio import file_digest, input_size
    rows, more, more_bytes = [], 0, 0
    for path, root in paths:
        size, digest = (known or {}).get(path) or (None, None)
        if len(rows) < MAX_FILES_LISTED:
            if size is None or digest is None:
                size, digest = file_digest(path, root)
            rows.append((path, size, digest))
        else:
            size = input_size(path, root) if size is None else size
            more, more_bytes = more + 1, more_bytes + size
    return rows, more, more_bytes


def output_files(result):
    """The rows of a WriteResult's files (hashing those written unhashed)."""
    known = {f.path: (f.bytes, f.sha256) for f in result.files}
    return file_rows([(f.path, None) for f in result.files], known)


def card_path(dst) -> str:
    """Where `convert --card` writes the card: beside the output (out/hf/ -> out/hf.card.html)."""
    return str(dst).rstrip("/" + os.sep) + ".card.html"


def render_card(stats, where, files, dataset, conversion=None, options=None) -> str:
    """The page for stats of `dataset` (at `where`, the path its neutral name comes
    from), described as identity.resolve says (options: the identity keywords given),
    with its notes."""
    from . import card_html
    from ..family.identity import add_note, resolve
    identity = resolve(dataset, where, options)
    add_note(dataset, identity)
    return card_html.render(stats, identity.title, files, conversion, identity,
                            dataset.notes)


def check_card_target(dst, force) -> str:
    """Where a conversion's card goes, refused before anything is written if it exists."""
    from ..errors import UsageError
    from ..io.staging import check_later_file
    if dst == "-" or "://" in str(dst):
        raise UsageError(dst, "--card writes beside a local output, not stdout or a URL",
                         "write the output to a local path, or leave out --card")
    target = card_path(dst)
    check_later_file(target, force, "--card writes a file")
    return target

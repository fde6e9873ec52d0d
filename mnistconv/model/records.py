"""The record stream: what every reader yields and every writer consumes. A Dataset
holds named Splits; each has a Header and yields Batches of images, labels and original
indices (positions in the collection first read, so a subset can be traced back).
"""

import tempfile
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Optional

import numpy as np

from ..io import budget
from ..io.written import OutputFile, WriteResult  # noqa: F401 (the face's names)
from .schema import Schema, schema_of

# What a caller asks for when it has no preference; readers cut it to budget.rows().
DEFAULT_BATCH = budget.MAX_ROWS


# Header.with_'s names of the target's fields.
_TARGET_FIELDS = {"label_dtype": "dtype", "num_classes": "width", "class_names": "names"}


@dataclass(frozen=True, init=False)
class Header:
    """What a split holds, known before any image is read: its count, its schema
    (schema.Schema: image, target, extra columns) and the file(s) it was read from.

        h = mnistconv.read("data/mnist").splits["train"].header
        h.count, h.shape, h.dtype  # 60000 (28, 28) uint8
        h.schema.image.channels     # 1

    shape, dtype, label_dtype, num_classes and class_names are the schema's, read
    through properties; Header(count, shape, dtype, ...) builds the schema from them.
    """

    count: int
    schema: Schema
    source: str  # the file(s) this split was read from, for messages

    def __init__(self, count: int, shape: Any = None, dtype: Any = None,
                 label_dtype: Any = np.uint8, num_classes: Optional[int] = None,
                 source: str = "", class_names: tuple = ()):
        # The loose fields of a one-class target (most readers' case); Header.of takes
        # a whole Schema (a multi-label target, extras).
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "schema", schema_of(tuple(shape), np.dtype(dtype),
                                                     label_dtype, num_classes, class_names))
        object.__setattr__(self, "source", source)

    @classmethod
    def of(cls, count: int, schema: Schema, source: str = "") -> "Header":
        """The header of `count` examples of `schema`, read from `source`."""
        header = object.__new__(cls)
        object.__setattr__(header, "count", count)
        object.__setattr__(header, "schema", schema)
        object.__setattr__(header, "source", source)
        return header

    @property
    def shape(self) -> tuple:
        """One image's shape, e.g. (28, 28) or (32, 32, 3)."""
        return self.schema.image.shape

    @property
    def dtype(self) -> np.dtype:
        """The pixel element type."""
        return self.schema.image.dtype

    @property
    def label_dtype(self) -> np.dtype:
        return self.schema.target.dtype

    @property
    def num_classes(self) -> Optional[int]:
        """The target's declared width (a one-hot width, TFDS' num_classes), else None."""
        return self.schema.target.width

    @property
    def class_names(self) -> tuple:
        """Names by label value, where the source records them; () otherwise."""
        return self.schema.target.names

    def with_(self, **changes: Any) -> "Header":
        """A copy with some fields changed: `h.with_(count=100)`, `h.with_(shape=...)`."""
        schema = changes.pop("schema", self.schema)
        image = {k: changes.pop(k) for k in ("shape", "dtype") if k in changes}
        target = {_TARGET_FIELDS[k]: changes.pop(k)
                  for k in ("label_dtype", "num_classes", "class_names") if k in changes}
        if image:
            schema = schema.with_(image=replace(schema.image, **image))
        if target:
            schema = schema.with_(target=replace(schema.target, **target))
        unknown = set(changes) - {"count", "source"}
        if unknown:
            raise TypeError(f"Header has no field {', '.join(sorted(unknown))}")
        return Header.of(changes.get("count", self.count), schema,
                         changes.get("source", self.source))


@dataclass
class Batch:
    """Consecutive examples of a split: images (n x *shape), labels (n), indices (n).

        for batch in split.batches(1024):
            x, y = batch.images, batch.labels
    """

    images: np.ndarray
    labels: np.ndarray
    indices: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


class Split(ABC):
    """A named split. Subclasses implement batches(); the rest has defaults.

    What a split can do beyond batches() it declares, so callers ask instead of probing
    for methods: can_seek (take() reads only the records asked for; else it spools the
    split once), can_select (select() reads only the chosen records: a TFRecord with
    record indexes), carries_extras (extra_fields() may give columns beside the label).
    """

    can_seek: bool = False
    can_select: bool = False
    carries_extras: bool = False
    _spool: Any = None  # take()'s copy of the images, made on first use

    def __init__(self, name: str, header: Header):
        self.name = name
        self.header = header

    @abstractmethod
    def batches(self, batch_size: int = DEFAULT_BATCH) -> Iterator[Batch]:
        """The split's examples in order, at most batch_size (and budget.BATCH_BYTES) at once."""

    def labels(self) -> np.ndarray:
        """All labels (small: one value per example). Readers override it cheaply."""
        parts = [b.labels for b in self.batches()]
        return np.concatenate(parts) if parts else np.zeros(0, self.header.label_dtype)

    def indices(self) -> np.ndarray:
        """Each example's original index (int64: its position where first read), in order."""
        parts = [b.indices for b in self.batches()]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def take(self, positions: np.ndarray) -> np.ndarray:
        """Images at the given positions (any order). Sources that can seek override
        this; the default spools the images once to a temporary file and gathers from it
        (gather_from_file), so memory stays bounded."""
        if self._spool is None:
            spool = tempfile.TemporaryFile()
            for batch in self.batches():
                spool.write(np.ascontiguousarray(batch.images).tobytes())
            spool.flush()
            self._spool = spool
        return gather_from_file(self._spool, 0, self.header, positions)

    def num_classes(self) -> int:
        """Width of a one-hot label: the number of classes the schema declares (its
        names, else its width), else the labels' max + 1 (0 for no labels). No floor:
        a two-class dataset gets two columns."""
        declared = self.header.schema.target.classes
        if declared:
            return declared
        labels = self.labels()
        return int(labels.max()) + 1 if len(labels) else 0

    def select(self, limit: Optional[int], per_class: Optional[int], shuffle: bool,
               seed: int) -> "Optional[Split]":
        """Where can_select: the chosen records (stream.select_split's choice), read
        alone; None to let select_split choose from the labels."""
        return None

    def extra_fields(self) -> Optional[tuple]:
        """Where carries_extras: (names, N x k int32 table) of the columns beside the
        label (QMNIST's), or None when this split has none."""
        return None

    def check(self) -> None:  # noqa: B027 (most splits defer nothing)
        """Read what a lazy reader leaves unread, so `info` finds damage (default:
        nothing is deferred)."""


class WrappedSplit(Split):
    """A split over another, `base`: whatever it does not change is the base's (its
    batches, labels, indices, take, class count, extra fields, what it can do). The
    transforms (selection, transpose, grey, relabel, a shard's range), TFDS' split and
    the card's observer are wrapped splits."""

    def __init__(self, base: Split, header: Optional[Header] = None):
        super().__init__(base.name, base.header if header is None else header)
        self.base = base
        self.can_seek = base.can_seek
        self.carries_extras = base.carries_extras

    def batches(self, batch_size: int = DEFAULT_BATCH) -> Iterator[Batch]:
        return self.base.batches(batch_size)

    def labels(self) -> np.ndarray:
        return self.base.labels()

    def indices(self) -> np.ndarray:
        return self.base.indices()

    def take(self, positions: np.ndarray) -> np.ndarray:
        return self.base.take(positions)

    def num_classes(self) -> int:
        """The base's (a subset missing a class keeps the whole split's count)."""
        declared = self.header.schema.target.classes
        return declared if declared else self.base.num_classes()

    def extra_fields(self) -> Optional[tuple]:
        return self.base.extra_fields()

    def check(self) -> None:
        self.base.check()


class ArraySplit(Split):
    """A split held in memory (tests, small npz files, transforms' results)."""

    can_seek = True

    def __init__(self, name: str, images: np.ndarray, labels: np.ndarray,
                 indices: Optional[np.ndarray] = None, source: str = "",
                 num_classes: Optional[int] = None):
        images, labels = np.asarray(images), np.asarray(labels)
        super().__init__(name, Header.of(len(labels), schema_of(
            images.shape[1:], images.dtype, labels.dtype, num_classes,
            label_shape=labels.shape[1:]), source))
        self._images, self._labels = images, labels
        self._indices = np.arange(len(labels), dtype=np.int64) if indices is None \
            else np.asarray(indices, dtype=np.int64)

    def batches(self, batch_size: int = DEFAULT_BATCH) -> Iterator[Batch]:
        for start, end in budget.spans(len(self._labels), budget.rows(self.header, batch_size)):
            yield Batch(self._images[start:end], self._labels[start:end],
                        self._indices[start:end])

    def labels(self) -> np.ndarray:
        return self._labels

    def indices(self) -> np.ndarray:
        return self._indices

    def take(self, positions: np.ndarray) -> np.ndarray:
        return self._images[positions]


@dataclass
class Dataset:
    """What read() returns and write() takes: the format it was read as, its splits by
    name in order, the files read, and notes on what the reader assumed.

        ds = mnistconv.read("data/mnist")
        ds.format, list(ds.splits)  # 'idx', ['train', 'test']
    """

    format: str
    splits: dict  # name -> Split, in order
    paths: list = field(default_factory=list)  # input files, for info and messages
    notes: list = field(default_factory=list)


class Progress:
    """How writers report progress; the CLI supplies a rich implementation."""

    # At most this many examples between two advances, so a display moves while a slow
    # writer works through a big batch (None: as the reader yields them).
    step: Optional[int] = None
    # The largest batch to ask a reader for when the reader is the slow side (None: any).
    batch: Optional[int] = None

    def start(self, description: str, total: int) -> None:
        """A task begins: `description` (a split's name) of `total` examples."""

    def advance(self, n: int) -> None:
        """n more examples are done."""

    def finish(self) -> None:
        """The task has ended (also after an error)."""

    def close(self) -> None:
        """The caller is done with it (after its last task)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


NO_PROGRESS = Progress()


def iter_batches(split: Split, progress: Progress = NO_PROGRESS,
                 description: Optional[str] = None,
                 batch_size: int = DEFAULT_BATCH) -> Iterator[Batch]:
    """Batches of a split, reporting progress by example count."""
    progress.start(description or split.name, split.header.count)
    try:
        wanted = budget.rows(split.header, min(batch_size, progress.batch or batch_size))
        for batch in split.batches(wanted):
            step = progress.step or len(batch)
            if len(batch) <= step:
                yield batch
                progress.advance(len(batch))
                continue
            # Smaller pieces, same examples: no writer's output depends on batch sizes.
            for at in range(0, len(batch), step):
                piece = Batch(batch.images[at:at + step], batch.labels[at:at + step],
                              batch.indices[at:at + step])
                yield piece
                progress.advance(len(piece))
    finally:
        progress.finish()


def gather_from_file(file: Any, offset: int, header: Header,
                     positions: np.ndarray) -> np.ndarray:
    """Gather images by position from a raw C-order array at `offset` in a file, through
    maps of at most budget.BATCH_BYTES each dropped before the next, so memory is bounded."""
    positions = np.asarray(positions, dtype=np.int64)
    shape = tuple(header.shape)
    if header.count == 0 or len(positions) == 0 or 0 in shape:
        # Nothing to map (mmap refuses a zero-length region): the answer is empty images.
        return np.zeros((len(positions),) + shape, header.dtype)
    if positions.min() < -header.count or positions.max() >= header.count:
        raise IndexError(f"positions outside 0..{header.count - 1}")
    positions = positions % header.count
    order = np.argsort(positions, kind="stable")
    ordered = positions[order]
    item = budget.image_bytes(shape, header.dtype)
    span = budget.BATCH_BYTES // item + 1
    out = np.empty((len(positions),) + shape, header.dtype)
    i = 0
    while i < len(ordered):
        first = int(ordered[i])
        stop = min(header.count, first + span)
        j = int(np.searchsorted(ordered, stop, "left"))
        mapped = np.memmap(file, dtype=header.dtype, mode="r", offset=offset + first * item,
                           shape=(stop - first,) + shape)
        try:
            out[order[i:j]] = mapped[ordered[i:j] - first]
        finally:
            del mapped
        i = j
    return out

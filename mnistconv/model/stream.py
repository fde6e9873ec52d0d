"""Transforms between a reader and a writer: choose splits, shuffle, balance, limit.
Selections are computed from labels alone; the images are then gathered batch by batch.
"""

from typing import Iterator, Optional

import numpy as np

from ..io import budget
from ..errors import BadOption, FormatError, UsageError
from ..limits import check_option_name
from .records import DEFAULT_BATCH, Batch, Dataset, Split, WrappedSplit
from .schema import CLASS

# The note a reader adds when it turned stored-transposed images upright (EMNIST).
TRANSPOSED_NOTE = "EMNIST stores its images transposed"


def extra_fields(split: Split) -> Optional[tuple]:
    """A split's fields beyond the label (QMNIST's): (names, N x k array), or None."""
    return split.extra_fields() if split.carries_extras else None


class SelectionSplit(WrappedSplit):
    """The examples of `base` at `positions`, in that order."""

    def __init__(self, base: Split, positions: np.ndarray):
        super().__init__(base, base.header.with_(count=len(positions)))
        self.positions = np.asarray(positions, dtype=np.int64)
        self._labels: Optional[np.ndarray] = None

    def labels(self) -> np.ndarray:
        if self._labels is None:
            self._labels = self.base.labels()[self.positions]
        return self._labels

    def indices(self) -> np.ndarray:
        """The base's original indices at the chosen positions."""
        return self.base.indices()[self.positions]

    def take(self, positions: np.ndarray) -> np.ndarray:
        return self.base.take(self.positions[positions])

    def extra_fields(self) -> Optional[tuple]:
        """The base's extra fields at the chosen positions."""
        extra = self.base.extra_fields()
        return None if extra is None else (extra[0], extra[1][self.positions])

    def batches(self, batch_size: int = DEFAULT_BATCH) -> Iterator[Batch]:
        labels, indices = self.labels(), self.indices()
        batch_size = budget.rows(self.header, batch_size)
        if len(self.positions) and np.all(np.diff(self.positions) > 0):
            yield from self._stream_increasing(labels, indices, batch_size)
            return
        for start, end in budget.spans(len(self.positions), batch_size):
            yield Batch(self.base.take(self.positions[start:end]), labels[start:end],
                        indices[start:end])

    def _stream_increasing(self, labels, indices, batch_size):
        """Increasing positions need no seeking: read the base in order, keep the rows."""
        done = offset = 0
        last = self.positions[-1]
        for batch in self.base.batches(batch_size):
            n = len(batch)
            lo = np.searchsorted(self.positions, offset)
            hi = np.searchsorted(self.positions, offset + n)
            if hi > lo:
                images = batch.images[self.positions[lo:hi] - offset]
                yield Batch(images, labels[done:done + hi - lo], indices[done:done + hi - lo])
                done += hi - lo
            offset += n
            if offset > last:
                break


class TransposedSplit(WrappedSplit):
    """Images with their rows and columns swapped (H x W [x C] becomes W x H [x C]: the
    channels stay last); `automatic` when a reader did it."""

    automatic: bool = False

    def __init__(self, base: Split):
        shape = tuple(base.header.shape)
        if len(shape) < 2:
            raise UsageError(base.header.source, "--transpose needs images of 2 or more "
                                                 "dimensions", "drop --transpose")
        super().__init__(base, base.header.with_(shape=(shape[1], shape[0]) + shape[2:]))

    def batches(self, batch_size: int = DEFAULT_BATCH) -> Iterator[Batch]:
        for b in self.base.batches(batch_size):
            yield Batch(np.ascontiguousarray(np.swapaxes(b.images, 1, 2)), b.labels,
                        b.indices)

    def take(self, positions: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.swapaxes(self.base.take(positions), 1, 2))


# What --grayscale does, as the summary, --json's notes and the card say it.
GRAYSCALE_RULE = ("ITU-R 601-2 luma, L = (19595 R + 38470 G + 7471 B + 32768) >> 16, as "
                  "Pillow's convert('L'); alpha dropped")


def to_grayscale(images: np.ndarray) -> np.ndarray:
    """uint8 images (... x H x W x C, C of 2, 3 or 4; or grey ... x H x W, returned as
    they are) made grey as Pillow's convert("L") makes them, to the same bytes: ITU-R
    601-2 luma L = (19595 R + 38470 G + 7471 B + 32768) >> 16 for RGB and RGBA (alpha
    dropped), the grey channel of grey + alpha. The reduction --grayscale asks for."""
    images = np.asarray(images)
    if images.ndim < 3 or images.shape[-1] not in (2, 3, 4):
        return images
    if images.shape[-1] == 2:
        return np.ascontiguousarray(images[..., 0])
    # uint32: the weighted sum of three 8-bit values reaches 2**24, past uint16.
    total = images[..., 0].astype(np.uint32) * 19595
    total += images[..., 1].astype(np.uint32) * 38470
    total += images[..., 2].astype(np.uint32) * 7471
    total += 0x8000
    total >>= 16
    return total.astype(np.uint8)


class GrayscaleSplit(WrappedSplit):
    """Colour images (H x W x C, C of 2, 3 or 4) made grey (H x W) by to_grayscale:
    the reduction --grayscale (grayscale=True) asks for, and only then."""

    def __init__(self, base: Split):
        shape = tuple(base.header.shape)
        super().__init__(base, base.header.with_(shape=shape[:2]))

    def batches(self, batch_size: int = DEFAULT_BATCH) -> Iterator[Batch]:
        # The base's batches hold C channels: sized by its header, not this one's.
        for b in self.base.batches(budget.rows(self.base.header, batch_size)):
            yield Batch(to_grayscale(b.images), b.labels, b.indices)

    def take(self, positions: np.ndarray) -> np.ndarray:
        return to_grayscale(self.base.take(positions))


class RangeSplit(WrappedSplit):
    """Records start..stop of a split as a split of their own (a shard's records), read
    with take() when the split can seek, else read up to stop. Its class count is the
    whole split's (a shard may miss a class)."""

    def __init__(self, split, start, stop):
        super().__init__(split, split.header.with_(count=stop - start))
        self.split, self.start, self.stop = split, int(start), int(stop)

    def batches(self, batch_size=DEFAULT_BATCH):
        start, stop = self.start, self.stop
        batch_size = budget.rows(self.header, batch_size)
        if self.can_seek:
            labels, indices = self.labels(), self.indices()
            for at in range(0, stop - start, batch_size):
                end = min(stop - start, at + batch_size)
                positions = np.arange(start + at, start + end, dtype=np.int64)
                yield Batch(self.split.take(positions), labels[at:end], indices[at:end])
            return
        position = 0
        for batch in self.split.batches(batch_size):
            n = len(batch)
            lo, hi = max(start - position, 0), min(stop - position, n)
            if lo < hi:
                yield Batch(batch.images[lo:hi], batch.labels[lo:hi], batch.indices[lo:hi])
            position += n
            if position >= stop:
                return

    def labels(self):
        return np.asarray(self.split.labels())[self.start:self.stop]

    def indices(self):
        return np.asarray(self.split.indices(), np.int64)[self.start:self.stop]

    def take(self, positions):
        return self.split.take(np.asarray(positions, np.int64) + self.start)

    def extra_fields(self):
        """The split's extra fields of these records."""
        extra = self.split.extra_fields()
        return None if extra is None else (extra[0], extra[1][self.start:self.stop])


def is_colour(split: Split) -> bool:
    """Whether a split's images have channels that --grayscale would reduce (H x W x C,
    C of 2, 3 or 4 and uint8)."""
    shape = tuple(split.header.shape)
    return len(shape) == 3 and shape[2] in (2, 3, 4) and \
        np.dtype(split.header.dtype) == np.uint8


def reduce_to_grayscale(dataset: Dataset) -> Dataset:
    """The dataset with every colour split made grey (GrayscaleSplit) and a note saying
    which and how; grey splits as they are, and no note when none was colour.

        grey = reduce_to_grayscale(mnistconv.read("cifar-images/"))
    """
    result, made = {}, []
    for name, split in dataset.splits.items():
        if is_colour(split):
            made.append(f"{name} ({'x'.join(map(str, split.header.shape))})")
            split = GrayscaleSplit(split)
        elif len(split.header.shape) == 3 and split.header.shape[2] != 1:
            raise UsageError(split.header.source or name,
                             f"--grayscale makes grey uint8 images of 2, 3 or 4 channels; "
                             f"split {name} has {np.dtype(split.header.dtype).name} "
                             f"images of shape {tuple(split.header.shape)}",
                             "drop --grayscale")
        result[name] = split
    notes = list(dataset.notes)
    if made:
        notes.append(f"colour made grayscale (--grayscale) in split{'s' * (len(made) > 1)} "
                     f"{', '.join(made)}: {GRAYSCALE_RULE}")
    return Dataset(dataset.format, result, dataset.paths, notes)


class RelabeledSplit(WrappedSplit):
    """Labels moved down by `offset` (EMNIST letters' 1..26 become 0..25), names too."""

    def __init__(self, base: Split, offset: int):
        names = tuple(base.header.class_names)[offset:]
        super().__init__(base, base.header.with_(class_names=names))
        self.offset = offset
        self._labels: Optional[np.ndarray] = None

    def _shift(self, labels):
        if self.offset and len(labels) and labels.min() < self.offset:
            i = int(np.argmax(labels < self.offset))
            raise FormatError(self.header.source, f"label {labels[i]} cannot be relabelled "
                                                  f"from {self.offset} to 0", "drop --relabel")
        return (labels - self.offset).astype(labels.dtype) if self.offset else labels

    def labels(self) -> np.ndarray:
        if self._labels is None:
            self._labels = self._shift(self.base.labels())
        return self._labels

    def batches(self, batch_size: int = DEFAULT_BATCH) -> Iterator[Batch]:
        for b in self.base.batches(batch_size):
            yield Batch(b.images, self._shift(b.labels), b.indices)

    def num_classes(self) -> int:
        """The names' count, else the base's less the offset."""
        names = self.header.class_names
        return len(names) if names else max(self.base.num_classes() - self.offset, 0)


def balanced_positions(labels: np.ndarray, order: np.ndarray, per_class: int,
                       where: str = "") -> np.ndarray:
    """The first `per_class` positions of each class in `order`, interleaved by class so
    any prefix of a multiple of the class count is balanced."""
    ordered_labels = labels[order]
    classes = np.unique(ordered_labels)
    picks = []
    for c in classes:
        of_class = order[ordered_labels == c]
        if len(of_class) < per_class:
            raise UsageError(where, f"class {c} has only {len(of_class)} examples, fewer "
                                    f"than --per-class {per_class}", "pass a smaller --per-class")
        picks.append(of_class[:per_class])
    if not picks:
        return np.zeros(0, np.int64)
    return np.stack(picks, axis=1).reshape(-1)


def select_split(split: Split, limit: Optional[int] = None, per_class: Optional[int] = None,
                 shuffle: bool = False, seed: int = 0) -> Split:
    """Shuffle, then balance per class, then limit (`split` itself if nothing asked)."""
    if not shuffle and per_class is None and limit is None:
        return split
    # A reader that can read only the chosen records (a TFRecord with record indexes).
    chosen = split.select(limit, per_class, shuffle, seed) if split.can_select else None
    if chosen is not None:
        return chosen
    count = split.header.count
    order = np.arange(count, dtype=np.int64)
    if shuffle:
        order = np.random.default_rng(seed).permutation(count)
    if per_class is not None:
        order = balanced_positions(split.labels(), order, per_class,
                                   split.header.source or split.name)
    if limit is not None:
        order = order[:limit]
    return SelectionSplit(split, order)


def select(dataset: Dataset, splits: Optional[list] = None, limit: Optional[int] = None,
           per_class: Optional[int] = None, shuffle: bool = False, seed: Optional[int] = None,
           transpose: Optional[bool] = None) -> Dataset:
    """The dataset with the chosen splits, each shuffled (with `seed`, 0 by default),
    balanced to `per_class` examples of each class, cut to `limit`. `transpose`: None
    takes images as the reader gives them, True swaps what is stored, False keeps it.

        subset = select(mnistconv.read("data/mnist"), ["train"], per_class=100)
    """
    if seed is not None and not shuffle:
        raise UsageError(None, "--seed applies only with --shuffle or --split-off",
                         "add one of them, or drop --seed")
    _check_seed(seed)
    for value, flag, low in ((limit, "--limit", 0), (per_class, "--per-class", 1)):
        if value is not None and value < low:
            raise BadOption(None, f"{flag} must be {low} or more, not {value}")
    seed = 0 if seed is None else seed
    chosen = _named_splits(dataset, splits)
    if transpose == "auto":
        transpose = None
    elif transpose in ("yes", "no"):
        transpose = transpose == "yes"
    result = {}
    notes = list(dataset.notes)
    for name, split in chosen.items():
        automatic = isinstance(split, TransposedSplit) and split.automatic
        if isinstance(split, TransposedSplit) and automatic and transpose is False:
            split = split.base  # as stored
            notes = [n for n in notes if TRANSPOSED_NOTE not in n]
        split = select_split(split, limit, per_class, shuffle, seed)
        if transpose and not automatic:
            split = TransposedSplit(split)
        result[name] = split
    return Dataset(dataset.format, result, dataset.paths, notes)


def _check_seed(seed):
    if seed is not None and not 0 <= seed < 2 ** 128:
        raise BadOption(None, f"--seed must be between 0 and 2**128 - 1, not {seed}")


def _named_splits(dataset: Dataset, splits: Optional[list]) -> dict:
    """{name: split} of those named (all if none), each there, in the order named."""
    if not splits:
        return dataset.splits
    missing = [s for s in splits if s not in dataset.splits]
    if missing:
        where = dataset.paths[0] if dataset.paths else None
        raise UsageError(where, f"no split named {', '.join(missing)}",
                         f"splits present: {', '.join(dataset.splits) or 'none'}")
    return {name: dataset.splits[name] for name in splits}


def split_off(dataset: Dataset, split_off: dict, split_off_from: Optional[str] = None,
              stratify: bool = False, seed: Optional[int] = None,
              splits: Optional[list] = None) -> Dataset:
    """The dataset with a new split carved out of one (--split-off): split_off is
    {name: size}, size a count (an int) or a fraction in (0, 1) (a float: k =
    round(size * n) of the source's n, Python's round). The source is split_off_from,
    else train, else the only one of `splits` (select's: the splits chosen). The carved
    positions are the first k of np.random.default_rng(seed).permutation(n) (seed 0 by
    default); with stratify, class c of n_c examples gets k_c = floor(k * n_c / n), the
    classes with the largest remainders (k * n_c mod n; ties: the smaller label) one more
    until they sum to k, and its k_c are the first positions of class c in that
    permutation. Both parts keep the source's order (so each reads the source in one
    pass and a rerun gives the same bytes); the new split follows its source, and a
    note says what was carved.

        parts = split_off(mnistconv.read("data/mnist"), {"validation": 0.1}, stratify=True)
    """
    example = "e.g. --split-off validation=0.1 (a fraction) or validation=5000 (a count)"
    if not isinstance(split_off, dict) or len(split_off) != 1:
        raise UsageError(None, f"--split-off takes one NAME=SIZE, not {split_off!r}", example)
    (name, size), = split_off.items()
    check_option_name(name, "--split-off")
    if isinstance(size, bool) or not isinstance(size, (int, float)):
        raise UsageError(None, f"--split-off {name}={size!r}: the size is not a number",
                         example)
    if isinstance(size, float) and not 0 < size < 1:
        raise UsageError(None, f"--split-off {name}={size}: a fraction must be more than "
                               "0 and less than 1", example)
    _check_seed(seed)
    seed = 0 if seed is None else seed
    where = dataset.paths[0] if dataset.paths else None
    if name in dataset.splits:
        raise UsageError(where, f"--split-off {name}: the input already has a split "
                                f"named {name}", "name a new split (splits present: "
                                                 f"{', '.join(dataset.splits)})")
    chosen = _named_splits(dataset, splits)
    source = split_off_from
    if source is None:
        source = "train" if "train" in chosen or len(chosen) != 1 else next(iter(chosen))
    if source not in chosen:
        raise UsageError(where, f"--split-off-from: no split named {source}",
                         f"name one with --split-off-from (splits present: "
                         f"{', '.join(chosen) or 'none'})")
    split = dataset.splits[source]
    # A reader's own transposition (EMNIST) stays outermost: select() can still undo it.
    upright = isinstance(split, TransposedSplit) and split.automatic
    base = split.base if upright else split
    n = base.header.count
    k = round(size * n) if isinstance(size, float) else size
    if not 0 < k < n:
        raise UsageError(where, f"--split-off {name}={size} would carve {k} of split "
                                f"{source}'s {n} examples",
                         f"give a count of 1 to {n - 1}, or a fraction that leaves "
                         "both parts examples")
    order = np.random.default_rng(seed).permutation(n)
    if stratify:
        if base.header.schema.target.kind != CLASS:
            raise UsageError(where, f"--stratify needs class labels; split {source} has "
                                    f"{base.header.schema.target.kind} targets",
                             "drop --stratify")
        labels = np.asarray(base.labels())
        classes, counts = np.unique(labels, return_counts=True)
        shares = k * counts.astype(np.int64) // n
        remainders = k * counts.astype(np.int64) % n
        shares[np.lexsort((classes, -remainders))[:k - int(shares.sum())]] += 1
        ordered = labels[order]
        order = np.concatenate([order[ordered == c][:share]
                                for c, share in zip(classes, shares)])
    carved = np.zeros(n, bool)
    carved[order[:k]] = True
    parts = {}
    for part_name, positions in ((source, ~carved), (name, carved)):
        part: Split = SelectionSplit(base, np.flatnonzero(positions))
        part.name = part_name
        if upright:
            part = TransposedSplit(part)
            part.automatic = True
        parts[part_name] = part
    result = {}
    for other, s in dataset.splits.items():
        result.update(parts if other == source else {other: s})
    how = f"{size}" + (", stratified by class" if stratify else "")
    note = (f"split {name} carved from {source} (--split-off {name}={how}, seed "
            f"{seed}): {k} of its {n} examples, {n - k} left in {source}; chosen by "
            f"numpy's default_rng({seed}).permutation, each part in {source}'s order")
    return Dataset(dataset.format, result, dataset.paths, list(dataset.notes) + [note])


# What apply_selection (and convert's select=) take beyond select()'s keywords.
CARVE_KEYS = ("split_off", "split_off_from", "stratify")


def apply_selection(dataset: Dataset, chosen: dict) -> Dataset:
    """split_off(dataset, ...) if chosen["split_off"] (the new split then chosen with its
    source), select(dataset, **the rest), then made grey (reduce_to_grayscale, with its
    note) if chosen["grayscale"]: the command line's choice of examples, as the CLI, a
    plan's tasks and convert(select=...) apply it (carving and grayscale are not
    selections, so select() does not take them)."""
    chosen = dict(chosen)
    grey = chosen.pop("grayscale", False)
    carving = {key: chosen.pop(key, None) for key in CARVE_KEYS}
    if carving["split_off"]:
        before = list(dataset.splits)
        dataset = split_off(dataset, carving["split_off"], carving["split_off_from"],
                            bool(carving["stratify"]), chosen.get("seed"),
                            chosen.get("splits"))
        if chosen.get("splits"):  # the new split is chosen, after its source
            names = list(dataset.splits)
            new = next(n for n in names if n not in before)
            splits = list(chosen["splits"])
            splits.insert(splits.index(names[names.index(new) - 1]) + 1, new)
            chosen["splits"] = splits
        if not chosen.get("shuffle"):
            chosen["seed"] = None  # (the carving's, not a shuffle's)
    else:
        for key, flag in (("split_off_from", "--split-off-from"), ("stratify", "--stratify")):
            if carving[key]:
                raise UsageError(None, f"{flag} applies only with --split-off",
                                 f"add --split-off NAME=SIZE, or drop {flag}")
    dataset = select(dataset, **chosen)
    return reduce_to_grayscale(dataset) if grey else dataset

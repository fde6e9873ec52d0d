"""Compare two datasets split by split, position by position (counts, labels, pixel
error on the 0..255 scale, the worst examples): how a user checks a conversion. Both
sides are read in lockstep batches, so memory is bounded whatever the formats.

Floats in [0, 1] are scaled by 255 (differences under NOISE are that rounding); a pixel
NaN or infinite on one side only differs by infinity; a channel axis of 1 is ignored.
Splits pair by name; a single split pairs with the other side's split of its name, or
must be named (pairs=[("train", "images")]). When they differ, explain() says why where
it can tell (JPEG on one side, another size, labels shifted, splits named differently)
and the option that would make them pass.
"""

import heapq
import itertools
import math
import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..io import budget
from ..errors import MnistconvError, UsageError
from ..io.fileio import input_entries, open_input
from ..model.records import NO_PROGRESS

COMPARE_BATCH = 2048  # images read per side at a time (readers cut it to the budget)
# A compared pixel costs ~24 bytes of float temporaries: this many are worked at a time.
_WORK_PIXELS = budget.BATCH_BYTES // 24
NOISE = 1e-3  # grey levels: float rounding from scaling [0, 1] pixels by 255
# Formats whose images may be stored as JPEG (their writers take --image-format).
_MAY_BE_JPEG = ("tfrecord", "webdataset", "imagefolder", "caffe-lmdb")
_SNIFF_BYTES = 1 << 16
_SHIFTS = 8  # positions tried when looking for labels moved along the split


@dataclass
class Example:
    """A compared example worth showing (a label mismatch or one of the worst)."""

    position: int
    index_a: int
    index_b: int
    label_a: int
    label_b: int
    max_error: float
    mean_error: float


@dataclass
class SplitComparison:
    """What compare_splits found for one pair of splits; `equal` and problems() judge it."""

    name_a: str
    name_b: str
    count_a: int
    count_b: int
    shape_a: tuple
    shape_b: tuple
    compared: int = 0  # examples compared (the smaller count; 0 if shapes differ)
    label_mismatches: int = 0
    first_label_mismatches: list = field(default_factory=list)  # Examples, at most 10
    pixels: int = 0
    pixels_differing: int = 0
    sum_abs: float = 0.0
    sum_sq: float = 0.0
    max_error: float = 0.0
    worst: list = field(default_factory=list)  # Examples, worst first
    tolerance: float = 0.0
    non_finite: int = 0  # pixel pairs where one side is NaN or infinite and the other not
    # Colour images (H x W x C, C > 1): per channel, the sum and largest of the
    # absolute differences (R, G, B(, A) in stored order); empty for grey.
    channel_sum_abs: list = field(default_factory=list)
    channel_max: list = field(default_factory=list)

    @property
    def channel_mean_error(self) -> list:
        """Mean absolute difference of each channel (empty for grey images)."""
        per = self.pixels / len(self.channel_sum_abs) if self.channel_sum_abs else 0
        return [total / per if per else 0.0 for total in self.channel_sum_abs]

    @property
    def shapes_match(self):
        """Same image shape, a channel axis of 1 at either end aside."""
        return _squeeze(self.shape_a) == _squeeze(self.shape_b)

    @property
    def label_agreement(self) -> Optional[float]:
        """Share of compared examples with the same label (None if none compared)."""
        return 1 - self.label_mismatches / self.compared if self.compared else None

    @property
    def mean_error(self) -> Optional[float]:
        """Mean absolute pixel difference, 0..255 scale (None if no pixels compared)."""
        return self.sum_abs / self.pixels if self.pixels else None

    @property
    def share_differing(self) -> Optional[float]:
        """Share of compared pixels that differ at all (None if none compared)."""
        return self.pixels_differing / self.pixels if self.pixels else None

    @property
    def psnr(self) -> Optional[float]:
        """Peak signal-to-noise ratio in dB for peak 255; inf when identical."""
        if not self.pixels:
            return None
        mse = self.sum_sq / self.pixels
        if mse == 0:
            return math.inf
        return -math.inf if math.isinf(mse) else 10 * math.log10(255.0 ** 2 / mse)

    @property
    def equal(self) -> bool:
        """Same count, same shape, every label equal, every pixel within tolerance."""
        return (self.count_a == self.count_b and self.shapes_match
                and self.label_mismatches == 0 and self.max_error <= self.tolerance)

    def problems(self) -> list:
        """Why the pair is not equal, one phrase each (empty when equal)."""
        out = []
        if self.count_a != self.count_b:
            out.append(f"counts differ ({self.count_a} vs {self.count_b})")
        if not self.shapes_match:
            out.append(f"image shapes differ ({_shape_text(self.shape_a)} vs "
                       f"{_shape_text(self.shape_b)})")
        if self.label_mismatches:
            out.append(f"{self.label_mismatches} label(s) differ")
        if self.non_finite:
            out.append(f"{self.non_finite} pixel(s) NaN or infinite on one side only")
        if self.max_error > self.tolerance:
            out.append(f"pixels differ by up to {self.max_error:g} "
                       f"(tolerance {self.tolerance:g})")
        return out

    def to_json(self):
        """This pair as JSON-ready values (JSON has no infinity: those become null)."""
        return {
            "a": self.name_a, "b": self.name_b,
            "count_a": self.count_a, "count_b": self.count_b,
            "shape_a": list(self.shape_a), "shape_b": list(self.shape_b),
            "compared": self.compared,
            "label_mismatches": self.label_mismatches,
            "label_agreement": self.label_agreement,
            "first_label_mismatches": [_example_json(e)
                                       for e in self.first_label_mismatches],
            "pixel_error": {
                "mean": _finite(self.mean_error),
                "max": _finite(self.max_error) if self.pixels else None,
                "share_differing": self.share_differing,
                "psnr_db": _finite(self.psnr),
                "identical": self.pixels > 0 and self.pixels_differing == 0,
                "non_finite": self.non_finite,
                # Colour only: grey comparisons' JSON stays as it was.
                **({"channels": [{"mean": _finite(m), "max": _finite(x)} for m, x in
                                 zip(self.channel_mean_error, self.channel_max)]}
                   if self.channel_max else {}),
            },
            "worst": [_example_json(e) for e in self.worst],
            "equal": self.equal, "problems": self.problems(),
        }


@dataclass
class Comparison:
    """The result of compare(): a SplitComparison per pair, the splits left out.

        c = compare(mnistconv.read("data/mnist"), mnistconv.read("mnist.npz"))
        c.equal, [s.problems() for s in c.splits]
    """

    splits: list  # SplitComparison, in pairing order
    only_a: list  # split names of A that were not compared
    only_b: list
    missing_counts: bool  # True when splits on one side only make the result unequal
    tolerance: float
    advice: list = field(default_factory=list)  # why they differ, where explain() can tell

    @property
    def equal(self) -> bool:
        """Every pair equal, at least one compared, and no split missing that counts."""
        if self.missing_counts and (self.only_a or self.only_b):
            return False
        return bool(self.splits) and all(s.equal for s in self.splits)

    def to_json(self):
        """The comparison as JSON-ready values (what `mnistconv compare --json` prints)."""
        return {"equal": self.equal, "tolerance": self.tolerance,
                "splits": [s.to_json() for s in self.splits],
                "only_in_a": self.only_a, "only_in_b": self.only_b,
                "advice": self.advice}


def _finite(x):
    return x if x is not None and math.isfinite(x) else None


def _example_json(e):
    return {**vars(e), "max_error": _finite(e.max_error),
            "mean_error": _finite(e.mean_error)}


def _squeeze(shape):
    """The image shape without channel axes of 1 at either end."""
    shape = tuple(shape)
    if len(shape) == 3 and shape[-1] == 1:
        return shape[:-1]
    if len(shape) == 3 and shape[0] == 1:
        return shape[1:]
    return shape


def _shape_text(shape):
    return "x".join(map(str, shape)) or "scalar"


def pair_splits(a, b, pairs=None, where=(None, None)):
    """([(name in A, name in B)], names left out in A, in B, whether those count against
    equality). `where` names A and B in messages (default: their first file)."""
    names_a, names_b = list(a.splits), list(b.splits)
    strict = False
    if pairs:
        for pair in pairs:
            for name, names, side, place in zip(pair, (names_a, names_b), (a, b), where):
                if name not in names:
                    raise UsageError(place or (side.paths[0] if side.paths else None),
                                     f"no split named {name}",
                                     f"splits present: {', '.join(names) or 'none'}")
    elif len(names_a) == 1 and len(names_b) == 1:
        pairs = [(names_a[0], names_b[0])]
    elif len(names_a) == 1 or len(names_b) == 1:
        single, many = (names_a[0], names_b) if len(names_a) == 1 else (names_b[0], names_a)
        if single not in many:
            side = "A" if len(names_a) == 1 else "B"
            raise UsageError(None, f"{side} has the single split '{single}' and the other "
                                   f"side has {', '.join(many)}",
                             f"choose one with --split NAME (or --split {single}:NAME / "
                             f"NAME:{single})")
        pairs = [(single, single)]
    else:
        pairs, strict = [(n, n) for n in names_a if n in b.splits], True
        if not pairs:
            pairing = " ".join(f"--split {x}:{y}" for x, y in zip(names_a, names_b)) \
                if len(names_a) == len(names_b) else "--split A_NAME:B_NAME"
            raise UsageError(None, f"no split names in common (A: {', '.join(names_a)}; "
                                   f"B: {', '.join(names_b)})", f"pair them with {pairing}")
    used_a, used_b = {p[0] for p in pairs}, {p[1] for p in pairs}
    return (list(pairs), [n for n in names_a if n not in used_a],
            [n for n in names_b if n not in used_b], strict)


def _aligned(split_a, split_b, batch_size):
    """Batches of both splits cut to the same lengths, position by position."""
    sides = [split_a.batches(batch_size), split_b.batches(batch_size)]
    pending = [None, None]
    while True:
        for k in (0, 1):
            # A spent batch (its empty remainder still a view of it) is let go before
            # the next is read: one batch per side at a time.
            if pending[k] is None or len(pending[k][1]) == 0:
                pending[k] = None
                batch = next(sides[k], None)
                if batch is None:
                    return
                pending[k] = (batch.images, batch.labels, batch.indices)
        n = min(len(pending[0][1]), len(pending[1][1]))
        yield tuple(x[:n] for x in pending[0]), tuple(x[:n] for x in pending[1])
        pending = [tuple(x[n:] for x in side) for side in pending]


class _Scale:
    """How one side's pixel values map to 0..255, decided on its first batch."""

    factor = None

    def __call__(self, images):
        images = np.asarray(images)
        # float32 holds 8- and 16-bit values exactly; wider types (float64, int32, ...)
        # are compared in float64, so a large value is not cast to infinity.
        exact = np.float32 if images.dtype.itemsize <= 2 or images.dtype == np.float32 \
            else np.float64
        if images.dtype.kind != "f":
            return images.astype(exact)
        if self.factor is None:
            # The largest finite value decides (NaN and infinity say nothing of scale).
            top = np.max(images, where=np.isfinite(images), initial=-np.inf)
            self.factor = 255.0 if top <= 1.0 else 1.0
        return images.astype(exact) * exact(self.factor)


def compare_splits(split_a, split_b, tolerance=0.0, worst=5, batch_size=COMPARE_BATCH,
                   progress=NO_PROGRESS) -> SplitComparison:
    """Compare two splits: counts, labels, pixel error within `tolerance`, and the
    `worst` examples (splits whose shapes differ are not read): `r.equal, r.psnr`."""
    result = SplitComparison(split_a.name, split_b.name, split_a.header.count,
                             split_b.header.count, tuple(split_a.header.shape),
                             tuple(split_b.header.shape), tolerance=float(tolerance))
    if not result.shapes_match:
        return result
    tally = _Tally(result, worst)
    progress.start(_names(result), min(result.count_a, result.count_b))
    try:
        for aligned in _aligned(split_a, split_b, batch_size):
            n = tally.add(*aligned)
            del aligned  # dropped before the next pair is read
            progress.advance(n)
    finally:
        progress.finish()
    result.compared = tally.position
    result.worst = [e for _, e in sorted(tally.heap, key=lambda t: t[0], reverse=True)]
    return result


class _Tally:
    """What compare_splits keeps across batches (the totals are in result)."""

    def __init__(self, result, worst):
        self.result, self.worst = result, worst
        self.size = int(np.prod(_squeeze(result.shape_a)))
        shape = _squeeze(result.shape_a)
        # Channels last, more than one: each pixel's values are C apart in a row.
        self.channels = shape[-1] if len(shape) == 3 and shape[-1] in (2, 3, 4) else 0
        if self.channels:
            result.channel_sum_abs = result.channel_sum_abs or [0.0] * self.channels
            result.channel_max = result.channel_max or [0.0] * self.channels
        self.scale_a, self.scale_b = _Scale(), _Scale()
        self.heap = []  # (max, mean, -position, Example)
        self.position = 0

    def add(self, side_a, side_b):
        """Add one aligned pair of batches; returns its length."""
        (xa, ya, ia), (xb, yb, ib) = side_a, side_b
        result, size, position = self.result, self.size, self.position
        n = len(ya)
        xa, xb = np.asarray(xa).reshape(n, size), np.asarray(xb).reshape(n, size)
        per_max, per_sum = np.zeros(n, np.float64), np.zeros(n, np.float64)
        # Rows of whole images while they fit _WORK_PIXELS, else column pieces of one row.
        step_rows = max(1, _WORK_PIXELS // max(size, 1))
        step_cols = max(1, size if step_rows > 1 else _WORK_PIXELS)
        if self.channels:  # pieces start and end on whole pixels
            step_cols = max(self.channels, step_cols // self.channels * self.channels)
        for r0 in range(0, n, step_rows):
            rows = slice(r0, min(n, r0 + step_rows))
            for c0 in range(0, size, step_cols):
                cols = slice(c0, min(size, c0 + step_cols))
                piece_max, piece_sum = _difference(result, self.scale_a(xa[rows, cols]),
                                                   self.scale_b(xb[rows, cols]),
                                                   self.channels)
                np.maximum(per_max[rows], piece_max, out=per_max[rows])
                per_sum[rows] += piece_sum
        with np.errstate(all="ignore"):
            per_mean = per_sum / size if size else per_sum
        if n and size:
            result.max_error = max(result.max_error, float(per_max.max()))
        ya, yb = np.asarray(ya).astype(np.int64), np.asarray(yb).astype(np.int64)
        wrong = np.flatnonzero(ya != yb)
        result.label_mismatches += len(wrong)

        def example(k):
            return Example(position + int(k), int(ia[k]), int(ib[k]), int(ya[k]),
                           int(yb[k]), float(per_max[k]), float(per_mean[k]))

        for k in wrong[:max(0, 10 - len(result.first_label_mismatches))]:
            result.first_label_mismatches.append(example(k))
        if self.worst and n:
            # Only the batch's own top candidates can enter the running top-k; ties go
            # to the earlier position, as in the heap.
            for k in np.lexsort((-np.arange(n), per_mean, per_max))[::-1][:self.worst]:
                if per_max[k] == 0:
                    break
                item = (float(per_max[k]), float(per_mean[k]), -(position + int(k)))
                if len(self.heap) < self.worst:
                    heapq.heappush(self.heap, (item, example(k)))
                elif item > self.heap[0][0]:
                    heapq.heapreplace(self.heap, (item, example(k)))
        self.position += n
        return n


def _difference(result, a, b, channels=0):
    """Add a piece of scaled pixels to result's totals (and each channel's, when the
    piece is whole pixels of `channels`); each row's max and sum of it."""
    with np.errstate(all="ignore"):
        diff = np.abs(a - b)
        odd = ~np.isfinite(diff)
        if odd.any():
            same = (a == b) | (np.isnan(a) & np.isnan(b))  # the same NaN or infinity
            unlike = odd & ~same & ~(np.isfinite(a) & np.isfinite(b))
            result.non_finite += int(np.count_nonzero(unlike))
            diff[odd & same] = 0
            diff[unlike] = np.inf
        diff[diff < NOISE] = 0
        piece_max = diff.max(axis=1)
        piece_sum = diff.sum(axis=1, dtype=np.float64)
    result.pixels += diff.size
    result.pixels_differing += int(np.count_nonzero(diff))
    if channels and diff.size:
        by_channel = diff.reshape(-1, channels)
        with np.errstate(over="ignore"):
            sums = by_channel.sum(axis=0, dtype=np.float64)
        highs = by_channel.max(axis=0)
        for c in range(channels):
            result.channel_sum_abs[c] += float(sums[c])
            result.channel_max[c] = max(result.channel_max[c], float(highs[c]))
    with np.errstate(over="ignore"):  # differences near float64's limit sum to inf
        result.sum_abs += float(diff.sum(dtype=np.float64))
        result.sum_sq += float(np.square(diff, dtype=np.float64).sum())
    return piece_max, piece_sum


def compare(a, b, pairs=None, tolerance=0.0, worst=5, progress=NO_PROGRESS,
            where=(None, None)) -> Comparison:
    """Compare datasets a and b (`where` names them in messages)."""
    pairs, only_a, only_b, strict = pair_splits(a, b, pairs, where)
    results = [compare_splits(a.splits[name_a], b.splits[name_b], tolerance, worst,
                              progress=progress) for name_a, name_b in pairs]
    comparison = Comparison(results, only_a, only_b, strict, float(tolerance))
    if not comparison.equal:
        comparison.advice = explain(a, b, comparison)
    return comparison


def explain(a, b, comparison) -> list:
    """Advice sentences for an unequal Comparison of datasets a and b (maybe none)."""
    advice = []
    splits = comparison.splits
    by_shapes = {}
    for s in splits:
        if not s.shapes_match:
            by_shapes.setdefault((s.shape_a, s.shape_b), []).append(_names(s))
    for (shape_a, shape_b), names in by_shapes.items():
        advice.append(f"A's images are {_shape_text(shape_a)} and B's {_shape_text(shape_b)} "
                      f"({', '.join(names)}): compare does not resize, so no option "
                      "makes them equal; convert without resizing or padding")
    offsets = {}
    for s in splits:
        if s.shapes_match and s.label_mismatches:
            found = _label_advice(a, b, s)
            if isinstance(found, int):
                offsets.setdefault(found, []).append(_names(s))
            elif found:
                advice.append(found)
    for k, names in offsets.items():
        advice.append(f"B's labels are A's {k:+d} for every example ({', '.join(names)}): "
                      f"{'B' if k > 0 else 'A'} numbers its classes from {abs(k)}, "
                      f"{'A' if k > 0 else 'B'} from 0")
    pixels_only = [s for s in splits if s.shapes_match and not s.label_mismatches
                   and s.count_a == s.count_b and not s.non_finite]
    if pixels_only and all(s.equal or s in pixels_only for s in splits):
        worst = max(s.max_error for s in pixels_only)
        if worst > comparison.tolerance:
            advice.append(_pixel_advice(a, b, math.ceil(worst)))
    if comparison.missing_counts and comparison.only_a and comparison.only_b:
        pairs = [f"--split {x}:{y}" for x, y in zip(comparison.only_a, comparison.only_b)]
        kept = [f"--split {s.name_a}" for s in splits]
        advice.append(f"splits named differently (only in A: "
                      f"{', '.join(comparison.only_a)}; only in B: "
                      f"{', '.join(comparison.only_b)}): pass "
                      f"{' '.join(kept + pairs)}")
    return advice


def _names(s):
    return s.name_a if s.name_a == s.name_b else f"{s.name_a} ~ {s.name_b}"


def _pixel_advice(a, b, worst):
    jpeg = [side for side, d in (("A", a), ("B", b)) if is_jpeg(d)]
    if jpeg:
        return (f"{' and '.join(jpeg)} {'are' if len(jpeg) > 1 else 'is'} JPEG (lossy): "
                f"pass --tolerance {worst}, or convert with --image-format png")
    return f"only pixel values differ, by up to {worst}: pass --tolerance {worst} if " \
        "that is expected"


def _label_advice(a, b, s):
    """The constant offset between the labels, a sentence if they are shifted, or None."""
    try:
        ya = np.asarray(a.splits[s.name_a].labels()).astype(np.int64)[:s.compared]
        yb = np.asarray(b.splits[s.name_b].labels()).astype(np.int64)[:s.compared]
    except Exception:  # labels the reader cannot give whole: nothing to explain
        return None
    if ya.ndim != 1 or len(ya) != len(yb) or not len(ya):
        return None
    offset = np.unique(yb - ya)
    if len(offset) == 1 and offset[0]:
        return int(offset[0])
    for shift in range(1, min(_SHIFTS, len(ya) - 1) + 1):
        for first, other, x, y in (("B", "A", ya[shift:], yb[:-shift]),
                                   ("A", "B", ya[:-shift], yb[shift:])):
            if len(x) >= 16 and np.mean(x == y) > 0.99:
                return (f"{_names(s)}: labels shifted: {first}'s example 0 is {other}'s "
                        f"example {shift} ({shift} example(s) dropped or added at the "
                        "start of one side)")
    return None


def is_jpeg(dataset) -> bool:
    """The dataset's first files are named .jpg or begin a JPEG (FF D8 FF) early on."""
    if dataset.format not in _MAY_BE_JPEG:
        return False
    sources = [sp.header.source for sp in dataset.splits.values()]
    for path in itertools.islice(_first_files(list(dataset.paths) + sources), 4):
        if path.lower().endswith((".jpg", ".jpeg")):
            return True
        try:
            with open_input(path) as f:
                if b"\xff\xd8\xff" in f.read(_SNIFF_BYTES):
                    return True
        except (OSError, MnistconvError):
            continue
    return False


def _first_files(paths, depth=3):
    """Files among paths, a directory standing for its first few files."""
    for path in paths:
        path = str(path)
        if os.path.isfile(path):
            yield path
        elif os.path.isdir(path) and depth > 0:
            try:  # advice only: a tree the reader refused is not looked into
                entries = input_entries(path)[:4]
            except MnistconvError:
                continue
            yield from _first_files(entries, depth - 1)

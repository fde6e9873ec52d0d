"""Why two compared datasets differ (JPEG on one side, another image size, labels
shifted, splits named differently) and the option that would make them pass, one
sentence each, as `mnistconv compare` prints it.
"""

import itertools
import math
import os

import numpy as np

from .errors import MnistconvError
from .fileio import input_entries, open_input

# Formats whose images may be stored as JPEG (their writers take --image-format).
_MAY_BE_JPEG = ("tfrecord", "webdataset", "imagefolder", "caffe-lmdb")
_SNIFF_BYTES = 1 << 16
_SHIFTS = 8  # positions tried when looking for labels moved along the split


def explain(a, b, comparison) -> list:
    """Advice sentences for an unequal Comparison of datasets a and b (empty when it
    cannot tell why)."""
    advice = []
    splits = comparison.splits
    by_shapes = {}
    for s in splits:
        if not s.shapes_match:
            by_shapes.setdefault((s.shape_a, s.shape_b), []).append(_names(s))
    for (shape_a, shape_b), names in by_shapes.items():
        advice.append(f"A's images are {_shape(shape_a)} and B's {_shape(shape_b)} "
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


def _shape(shape):
    return "x".join(map(str, shape)) or "scalar"


def _pixel_advice(a, b, worst):
    jpeg = [side for side, d in (("A", a), ("B", b)) if is_jpeg(d)]
    if jpeg:
        who = " and ".join(jpeg)
        verb = "are" if len(jpeg) > 1 else "is"
        return (f"{who} {verb} JPEG (lossy): pass --tolerance {worst}, or convert with "
                "--image-format png")
    return f"only pixel values differ, by up to {worst}: pass --tolerance {worst} if " \
        "that is expected"


def _label_advice(a, b, s):
    """The constant offset between the labels, or a sentence saying they are shifted a
    few positions along, or None."""
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
    """The dataset's images are stored as JPEG: its first files are named .jpg or hold
    a JPEG start (FF D8 FF) in their first bytes."""
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
    """Files among paths, a directory standing for its first few files (to a bounded
    depth)."""
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

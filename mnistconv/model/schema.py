"""What a split holds, declared once: its schema, known before any image is read.

A Schema is the image (shape and pixel type: height, width, channels), the target (one
class per example with its width and names, a multi-label vector of width k with its
names, or none) and named per-example extra columns with their types. Every split
carries one in its Header; a writer reads what it must encode from it, and the write
contract's door (contract.admit) compares it with what the output format declares it
holds (spec.Holds) before anything is written.

    s = mnistconv.read("data/mnist").splits["train"].header.schema
    s.image.height, s.image.width, s.image.channels, s.image.dtype  # 28 28 1 uint8
    s.target.kind, s.target.classes                                # 'class' None
    str(s)  # '28x28 grey uint8, class'
"""

from dataclasses import dataclass, field, replace
from typing import Any, Optional

import numpy as np

from ..limits import MAX_CHANNELS, channels_of, pixels_per_channel  # noqa: F401 (re-exported)

CHANNEL_NAMES = {1: "grey", 2: "grey+alpha", 3: "RGB", 4: "RGBA"}

# Target kinds.
CLASS = "class"  # one integer class per example
MULTILABEL = "multilabel"  # a 0/1 vector of width k per example
NO_TARGET = "none"  # no target at all
TARGET_KINDS = (CLASS, MULTILABEL, NO_TARGET)


@dataclass(frozen=True)
class Image:
    """One example's image: its shape ((H, W) for one channel, (H, W, C) channels last)
    and pixel type. height, width and channels are read from the shape, the one source."""

    shape: tuple
    dtype: np.dtype = np.dtype(np.uint8)

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    @property
    def height(self) -> Optional[int]:
        return self.shape[0] if self.channels is not None else None

    @property
    def width(self) -> Optional[int]:
        return self.shape[1] if self.channels is not None else None

    @property
    def channels(self) -> Optional[int]:
        """1 (grey), 2, 3 (RGB), 4 (RGBA); None when the shape is no H x W (x C) image."""
        return channels_of(self.shape)

    def __str__(self) -> str:
        size = "x".join(map(str, self.shape[:2] if self.channels is not None
                            else self.shape)) or "scalar"
        kind = CHANNEL_NAMES.get(self.channels or 0, "array")
        return f"{size} {kind} {self.dtype.name}"


@dataclass(frozen=True)
class Target:
    """What each example is labelled with: kind CLASS (one integer), MULTILABEL (a 0/1
    vector of `width`) or NO_TARGET; width: the number of classes where the source
    declares it (a one-hot width, TFDS' num_classes), names: by class, where recorded."""

    kind: str = CLASS
    width: Optional[int] = None
    names: tuple = ()
    dtype: np.dtype = np.dtype(np.uint8)

    def __post_init__(self):
        if self.kind not in TARGET_KINDS:
            raise ValueError(f"target kind {self.kind!r} is not one of {TARGET_KINDS}")
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    @property
    def classes(self) -> Optional[int]:
        """The number of classes the source declares: its names', else its width; None
        when neither is known (then the labels present tell: Split.num_classes)."""
        return len(self.names) or self.width or None

    def __str__(self) -> str:
        if self.kind == NO_TARGET:
            return "no target"
        n = self.classes
        what = "class" if self.kind == CLASS else "multi-label"
        return f"{what} of {n}" if n else what


@dataclass(frozen=True)
class Extra:
    """A named per-example column beside the target (QMNIST's writer_id, ...)."""

    name: str
    dtype: np.dtype = np.dtype(np.int32)

    def __post_init__(self):
        object.__setattr__(self, "dtype", np.dtype(self.dtype))

    def __str__(self) -> str:
        return f"{self.name} {self.dtype.name}"


@dataclass(frozen=True)
class Schema:
    """A split's image, target and extra columns (see the module's docstring)."""

    image: Image
    target: Target = field(default_factory=Target)
    extras: tuple = ()  # of Extra, in column order

    def __post_init__(self):
        object.__setattr__(self, "extras", tuple(self.extras))

    @property
    def extra_names(self) -> tuple:
        return tuple(e.name for e in self.extras)

    def with_(self, **changes: Any) -> "Schema":
        """A copy with some parts changed: `s.with_(target=...)`."""
        return replace(self, **changes)

    def __str__(self) -> str:
        text = f"{self.image}, {self.target}"
        if self.extras:
            text += f", extras: {', '.join(map(str, self.extras))}"
        return text

    def as_json(self) -> dict:
        """The schema as JSON values (`mnistconv info --json`)."""
        i, t = self.image, self.target
        return {"image": {"shape": list(i.shape), "height": i.height, "width": i.width,
                          "channels": i.channels, "dtype": i.dtype.name},
                "target": {"kind": t.kind, "classes": t.classes, "names": list(t.names),
                           "dtype": t.dtype.name},
                "extras": [{"name": e.name, "dtype": e.dtype.name} for e in self.extras]}


def schema_of(shape: tuple, dtype: Any, label_dtype: Any = np.uint8,
              num_classes: Optional[int] = None, class_names: tuple = (),
              label_shape: tuple = ()) -> Schema:
    """The schema of images of `shape`/`dtype` and labels of `label_dtype`; labels of
    one more axis (label_shape (k,)) are a multi-label vector of width k."""
    label_shape = tuple(label_shape)
    if len(label_shape) == 1:
        target = Target(MULTILABEL, int(label_shape[0]), class_names, label_dtype)
    else:
        target = Target(CLASS, num_classes, class_names, label_dtype)
    return Schema(Image(shape, dtype), target)

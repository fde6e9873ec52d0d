"""PyTorch datasets over anything mnistconv reads (through mnistconv.read(), so every
registered format): `dataset(path)` gives (image tensor, label) pairs. torch is
imported here only (the `torch` extra).

    from torch.utils.data import DataLoader
    import mnistconv

    train = mnistconv.torch.dataset("mnist.npz", split="train")
    for images, labels in DataLoader(train, batch_size=128, shuffle=True):
        ...  # images: float32 N x 1 x 28 x 28 in [0, 1]; labels: int64 N

A map-style Dataset holds the split's uint8 pixels in memory, read once, so DataLoader
workers share them. A split stored as several files, or iterable=True, gives an
IterableDataset streaming batch by batch, each worker taking whole files when the
split can be cut into them (Split.shards()), else every n-th batch.
"""

import functools

from ..io.budget import MAX_IN_MEMORY
from ..errors import optional_import

__all__ = ["dataset", "to_tensor"]
# dataset()'s own keywords, listed when one is misspelt.
_OWN = ("split", "format", "transform", "target_transform", "iterable", "batch_size")


def _torch():
    return optional_import("torch", "torch", "mnistconv.torch")


def to_tensor(pixels):
    """The default transform: uint8 pixels (H x W, or H x W x C) as a float32 tensor
    C x H x W in [0, 1], as torchvision's ToTensor() makes from a PIL image."""
    torch = _torch()
    tensor = torch.from_numpy(pixels.copy() if not pixels.flags.writeable else pixels)
    tensor = tensor.unsqueeze(0) if tensor.ndim == 2 else tensor.permute(2, 0, 1)
    return tensor.float().div_(255) if tensor.dtype == torch.uint8 else tensor.float()


def dataset(path, split=None, *, format=None, transform=None, target_transform=None,
            iterable=None, batch_size=1024, **read_options):
    """A torch Dataset of (transform(pixels), target_transform(label)) for one split
    of what mnistconv reads at `path` (format detected, or named by `format`; read
    options as for mnistconv.read; a keyword neither takes is a UsageError listing
    the valid ones). split: the only one, else 'train' (an unknown one is a
    UsageError naming those there are).
    transform: takes the uint8 numpy pixels (default: to_tensor). iterable: None
    decides (a multi-file split or one over MAX_IN_MEMORY streams), True streams,
    False loads into memory. batch_size: rows read at a time when streaming.

        ds = mnistconv.torch.dataset("mnist-hf/", split="test")
        image, label = ds[0]      # tensor 1 x 28 x 28, int
    """
    import numpy as np

    from . import loading
    torch = _torch()
    ds = loading.read("mnistconv.torch.dataset", _OWN, path, format, read_options)
    chosen = ds.splits[loading.split_name(ds.splits, split, path)]
    transform = transform or to_tensor
    if iterable is None:
        h = chosen.header
        size = h.count * int(np.prod(h.shape, dtype=np.int64)) * np.dtype(h.dtype).itemsize
        iterable = len(getattr(chosen, "files", ())) > 1 or size > MAX_IN_MEMORY
    if iterable:
        return _classes(torch)[1](chosen, transform, target_transform, batch_size)
    return _classes(torch)[0](chosen, transform, target_transform)


@functools.cache
def _classes(torch):
    """The two Dataset classes, made on first use (they subclass torch's)."""
    import numpy as np

    def example(ds, pixels, label):
        label = int(label)
        return ds.transform(pixels), ds.target_transform(label) if ds.target_transform else label

    class SplitDataset(torch.utils.data.Dataset):
        """A split in memory: random access by position."""

        def __init__(self, split, transform, target_transform):
            self.name = split.name
            self.labels = np.asarray(split.labels())
            h = split.header
            self.images = np.empty((h.count,) + tuple(h.shape), h.dtype)
            at = 0
            for batch in split.batches():
                self.images[at:at + len(batch)] = batch.images
                at += len(batch)
            self.transform, self.target_transform = transform, target_transform

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, i):
            return example(self, self.images[i], self.labels[i])

    class StreamingDataset(torch.utils.data.IterableDataset):
        """A split streamed in order; DataLoader workers share the work."""

        def __init__(self, split, transform, target_transform, batch_size):
            self.split, self.batch_size = split, batch_size
            self.transform, self.target_transform = transform, target_transform

        def __len__(self):
            return self.split.header.count

        def _parts(self):
            """This worker's batches: whole shards when there are enough, else every n-th."""
            info = torch.utils.data.get_worker_info()
            workers, me = (info.num_workers, info.id) if info else (1, 0)
            shards = self.split.shards() if hasattr(self.split, "shards") else None
            if shards and len(shards) >= workers:
                for shard in shards[me::workers]:
                    yield from shard.batches(self.batch_size)
                return
            for i, batch in enumerate(self.split.batches(self.batch_size)):
                if i % workers == me:
                    yield batch

        def __iter__(self):
            for batch in self._parts():
                for pixels, label in zip(batch.images, batch.labels):
                    yield example(self, pixels, label)

    return SplitDataset, StreamingDataset

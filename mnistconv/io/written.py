"""What a write made: its files (path, bytes, SHA-256), counts and stats. Here, below the
record model, because the output side (staging, remote uploads) makes them too."""

from dataclasses import dataclass, field
from typing import Iterator, Optional


@dataclass(frozen=True)
class OutputFile:
    """One file a writer wrote: its path, size in bytes and SHA-256 (hex).

        for f in mnistconv.write(ds, "mnist.npz"):
            print(f.path, f.bytes, f.sha256)
    """

    path: str
    bytes: int
    sha256: Optional[str]  # None inside fileio.unhashed_outputs()


@dataclass(frozen=True)
class WriteResult:
    """What a writer wrote: files (OutputFiles, in the order written), counts (examples
    per split) and stats (format-specific figures). It also behaves as its list of files.

        result = mnistconv.write(ds, "mnist.tfrecord")
        result.counts["train"], result.stats.get("jpeg_mean_abs_error")
        for f in result: print(f.path, f.sha256)
    """
    files: list
    counts: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)

    def __iter__(self) -> Iterator[OutputFile]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> OutputFile:
        return self.files[i]

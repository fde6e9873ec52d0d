"""A zip archive read through the guard: its own module, so that only the commands that
read a zip (npz, KMNIST, MedMNIST, a downloaded archive) import zipfile."""

from typing import Optional
import zipfile

from .fileio import open_input


class InputZip(zipfile.ZipFile):
    """A zip archive read from a file opened through open_input; closing it closes the
    file (ZipFile leaves a file object it was given open)."""

    def __init__(self, path: str, root: Optional[str] = None):
        self._guarded = open_input(path, root)
        try:
            super().__init__(self._guarded)
        except BaseException:
            self._guarded.close()
            raise

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._guarded.close()

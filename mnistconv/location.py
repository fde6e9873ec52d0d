"""Where an output goes: a local path or a URL of a store (`s3://bucket/sets`), told
apart once, so that no runner makes a URL absolute with os.path (which turned
`s3://b/x` into `./s3:/b/x` in the working folder) or joins its names with os.sep.

A planned, sliced or Beam run to a URL writes into the store (mnistconv.plan), or is
refused in one line where the store takes no writes (http, https).
"""

import os

from . import remote


def _file_url(text):
    """A file:// URL of this machine as the local path it names, else text."""
    if text[:7].lower() == "file://" and "/" in text[7:]:
        from urllib.parse import unquote
        host, rest = text[7:].split("/", 1)
        if host in ("", "localhost"):
            return unquote("/" + rest)
    return text


class Location:
    """An output path as the user named it, local or remote.

        Location("out/m.tfrecord").absolute()    # '/home/ann/out/m.tfrecord'
        Location("s3://b/sets/m.tfrecord").remote  # True
        Location("s3://b/sets/").name              # 'sets'
    """

    def __init__(self, path):
        self.text = _file_url(str(path))
        self.remote = remote.is_remote(self.text)

    def __str__(self):
        return self.text

    def __repr__(self):
        return f"Location({self.text!r})"

    @property
    def name(self) -> str:
        """The last name (a folder's without its trailing separator)."""
        if self.remote:
            return self.text.rstrip("/").rsplit("/", 1)[-1]
        return os.path.basename(self.text.rstrip(os.sep))

    @property
    def is_folder_name(self) -> bool:
        """Whether it ends in a separator (the user named a folder)."""
        return self.text.endswith("/" if self.remote else os.sep)

    def parent(self) -> "Location":
        """The folder it is in."""
        if self.remote:
            return Location(self.text.rstrip("/").rsplit("/", 1)[0])
        return Location(os.path.dirname(os.path.abspath(self.text)))

    def absolute(self) -> str:
        """A local path made absolute, its trailing separator kept; a URL as it is."""
        if self.remote:
            return self.text
        made = os.path.abspath(self.text)
        return os.path.join(made, "") if self.is_folder_name else made

    def store_folder(self) -> "remote.Store":
        """The store's folder this URL is in (refused in one line, naming the URL, if
        the store takes no writes)."""
        return remote.Store(self.parent().text, named=self.text)

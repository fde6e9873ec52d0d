"""Where an output goes: a local path or a URL of a store (`s3://bucket/sets`), told
apart once, so that no runner makes a URL absolute with os.path (which turned
`s3://b/x` into `./s3:/b/x` in the working folder) or joins its names with os.sep.

SetFolder is where a planned set's files are (mnistconv.runners.plan): a local folder, or a
store's folder that a planned, sliced or Beam run writes into (each file made in a
private temporary folder, then put whole), refused in one line where the store takes
no writes (http, https). What it reads back goes through the guarded output opener
(fileio.open_output_file) or remote.Store's bounded reads.
"""

import contextlib
import json
import os
import tempfile

from . import remote
from ..errors import UsageError
from .fileio import StagedOutput, create_staged, move_own, output_digest, read_output_file
from .staging import remove_dead_leftovers, remove_scratch, staging_prefix


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


@contextlib.contextmanager
def _locked(folder):
    """An exclusive flock on folder (never held while StagedOutput commits: it locks it too)."""
    import fcntl
    os.makedirs(folder, exist_ok=True)
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class SetFolder:
    """Where a planned set's progress record, shards and metadata are (record_path(path)
    names the record: the set's files are named from the folder it is in, the output's
    own for a folder output): a local folder, or the matching folder of a store, for
    which `folder` is a private local one the format writes into, each file then
    uploaded and removed. Files are named by their path from `folder` ('/'-separated),
    as a plan's tasks name them. A context manager: the private folder goes at its end.
    """

    def __init__(self, path, record_path):
        location = Location(path)
        self.store, self.stage = None, None
        if location.remote:
            from ..limits import is_safe_file_name
            inside = location.text.split("://", 1)[1].rstrip("/")
            if "/" not in inside or not is_safe_file_name(location.name):
                raise UsageError(location.text, "names no file or folder inside a bucket "
                                                "or folder", "name the output, e.g. "
                                                "s3://bucket/sets/mnist.tfrecord")
            self.store = location.store_folder()
            remove_dead_leftovers(tempfile.gettempdir())
            self.stage = tempfile.mkdtemp(prefix=staging_prefix("plan-out")[1:])
            self.path = os.path.join(self.stage, location.name) + (
                os.sep if location.is_folder_name else "")
        else:
            self.path = location.text
        self.record = record_path(self.path)
        self.folder = os.path.dirname(self.record)
        self.record_name = os.path.basename(self.record)
        # Locked: the folder the output is in, not the output's own folder, which the
        # commits of the set's files inside it lock (a second flock there would wait on
        # the first). For a file output, the record's folder.
        self.lock_folder = os.path.dirname(os.path.abspath(self.path.rstrip(os.sep)))
        if self.store is not None and self.folder != os.path.abspath(self.stage):
            # The record inside a folder output: the files are named from that folder,
            # so the store's folder is the output URL's own.
            inside = os.path.relpath(self.folder, os.path.abspath(self.stage))
            self.store = remote.Store(f"{self.store.url}/{inside.replace(os.sep, '/')}",
                                      named=location.text)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.stage is not None:
            remove_scratch(self.stage)

    def local(self, name) -> str:
        """The local path of a file of the set (for a store: in the private folder)."""
        return os.path.join(self.folder, *name.split("/"))

    def name_of(self, local_path) -> str:
        """A local path's name from the folder."""
        return os.path.relpath(os.path.abspath(local_path), self.folder).replace(os.sep, "/")

    def shown(self, name, path) -> str:
        """A file of the set as the user named the output (relative when it was)."""
        if self.store is not None:
            return self.store.url_of(name)
        return self.local(name) if os.path.isabs(str(path)) else \
            os.path.relpath(self.local(name))

    def shown_record(self) -> str:
        """The progress record in a message: its URL, or its absolute local path."""
        return self.store.url_of(self.record_name) if self.store else self.record

    def lock(self):
        """An exclusive lock on the folder the output is in (a store has none)."""
        return contextlib.nullcontext() if self.store else _locked(self.lock_folder)

    def read_record(self, limit):
        """The record's first limit + 1 bytes, None when there is none (a link, FIFO or
        device in its place is refused)."""
        if self.store is not None:
            return self.store.read(self.record_name, limit)
        return read_output_file(self.record, self.folder, limit)

    def write_record(self, record):
        """Replace the record whole (a temporary beside it renamed, or one put)."""
        if self.store is None:
            from .staging import refuse_replacing_special
            refuse_replacing_special(self.record)
        folder = self.stage if self.store else self.folder
        os.makedirs(folder, exist_ok=True)  # a folder output's own, made with its record
        tmp = os.path.join(folder, staging_prefix(self.record_name) + "record")
        with create_staged(tmp, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1, sort_keys=True)
            f.write("\n")
        if self.store is not None:
            try:
                self.store.put(tmp, self.record_name)
            finally:
                remove_scratch(tmp)
        else:
            move_own(tmp, self.record)  # the record replaced whole

    def digest(self, name):
        """(bytes, SHA-256) of a file of the set, None when there is none (a link, FIFO or
        device in its place is refused)."""
        if self.store is not None:
            return self.store.digest(name)
        return output_digest(self.local(name), self.folder)

    def exists(self, local_path) -> bool:
        """Whether anything is at a file's place."""
        if self.store is not None:
            return self.store.exists(self.name_of(local_path))
        return os.path.lexists(local_path)

    def where(self, name) -> str:
        """A file of the set in a message: its URL, or its absolute local path."""
        return self.store.url_of(name) if self.store else self.local(name)

    @contextlib.contextmanager
    def writing(self, name, keep=True):
        """A path to write the file `name` at, placed when the block ends well (renamed,
        or uploaded), or with keep=False always dropped."""
        if self.store is not None:
            local = self.local(name)
            os.makedirs(os.path.dirname(local), exist_ok=True)
            try:
                create_staged(local).close()  # made, as StagedOutput.file makes it
                yield local
                if keep:
                    self.store.put(local, name)
            finally:
                remove_scratch(local)
        elif keep:
            with StagedOutput(force=True) as staged:
                yield staged.file(self.local(name))
        else:
            staged = StagedOutput(force=True)
            try:
                yield staged.file(self.local(name))
            finally:
                staged.abort()

    def placed(self, names):
        """The metadata files `names` a finishing step wrote, placed (uploaded to a
        store); {name: [bytes, SHA-256]} of those there."""
        if self.store is not None:
            for name in names:
                if os.path.isfile(self.local(name)):
                    self.store.put(self.local(name), name)
        found = {name: self.digest(name) for name in names}
        return {name: list(f) for name, f in found.items() if f is not None}

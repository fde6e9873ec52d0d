"""Files in and out: the one guarded input opener, gzip by content, hashed outputs, one
deterministic gzip writer. Staged outputs are in staging.py, re-exported here.
"""

import gzip
import hashlib
import os
import re
import stat
import zlib
from contextlib import contextmanager
from contextvars import ContextVar
from typing import IO, TYPE_CHECKING, Any, Callable, ContextManager, Iterator, Optional

from ..errors import CorruptData, NoAccess, NotFound, Truncated, UsageError
# Re-exported: formats and codecs take staged outputs from here only (test_layers).
from .staging import (STAGING_MARK, StagedOutput, check_output_path, create_staged,  # noqa: F401
                      exists_error, is_staging_name, is_stdio, is_stream_path,
                      open_staged, output_entries, own_file_size, refuse_replacing_special,
                      remove_dead_leftovers, remove_scratch, signals_deferred,
                      staging_prefix)

if TYPE_CHECKING:
    from .written import OutputFile

GZIP_MAGIC = b"\x1f\x8b"
# Deflate expands at most 1032:1 (a 258-byte match per ~2 bits), so a gzip file of n
# bytes cannot hold more than this many times n: a header declaring more is lying.
GZIP_MAX_RATIO = 1032
_GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)


def input_root(path: str) -> str:
    """The tree a named input confines its reads to: the directory itself, or the
    folder of a file (where its side files and shards live), resolved."""
    path = os.fspath(path)
    return os.path.realpath(path if os.path.isdir(path) else os.path.dirname(path) or ".")


# An O_PATH descriptor resolves a path in three system calls; realpath takes one a component.
_PROC_FD = hasattr(os, "O_PATH") and os.path.isdir("/proc/self/fd")


def _real(path):
    """os.path.realpath(path), faster."""
    if _PROC_FD:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return os.path.realpath(path)  # dangling or unreadable: resolved by name
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
    return os.path.realpath(path)


def _within(real, folder) -> bool:
    return real == folder or real.startswith(folder.rstrip(os.sep) + os.sep)


# Trees whose links the user said to follow (--follow-links, read(follow_links=True)),
# resolved: kept for the process, as a dataset's batches are read after read() returns.
_FOLLOWED: set = set()


def follow_links_under(path: str) -> None:
    """Let reads under the input `path` (see input_root) follow links that leave it, for
    the rest of the process: the user trusts this tree. A FIFO, device or socket is
    still refused, link or not."""
    _FOLLOWED.add(_real(input_root(path)))


@contextmanager
def following_links() -> Iterator[None]:
    """Within this block, reads under any input follow links that leave it (the command
    line's --follow-links); FIFOs, devices and sockets are still refused."""
    added = os.sep not in _FOLLOWED
    _FOLLOWED.add(os.sep)
    try:
        yield
    finally:
        if added:
            _FOLLOWED.discard(os.sep)


# huggingface_hub's cache: <cache>/<kind>--<owner>--<name>/snapshots/<revision>/... are
# links into ../../blobs; the repository's folder is the tree they belong to.
# Compiled on first use (re caches it): only a path that leaves its tree is checked.
_HF_SNAPSHOT = (r"(.*%s(?:models|datasets|spaces)--[^%s]+)%ssnapshots%s[^%s]+(?:%s|\Z)"
                % ((re.escape(os.sep),) * 6))


def _hf_repository(real_root):
    """The cache folder of the Hugging Face repository whose snapshot holds real_root."""
    m = re.match(_HF_SNAPSHOT, real_root)
    return m.group(1) if m and os.path.isdir(os.path.join(m.group(1), "blobs")) else None


def _outside(path, root) -> bool:
    """Whether path, its links and '..' resolved, lies outside the directory root (a
    tree the user trusts with --follow-links, or a Hugging Face cache snapshot's
    repository, counts as inside)."""
    real, root = _real(path), _real(root)
    if _within(real, root):
        return False
    if any(_within(root, tree) for tree in _FOLLOWED):
        return False
    repository = _hf_repository(root)
    return repository is None or not _within(real, repository)


def _refuse_outside(path, root):
    raise UsageError(path, f"leads outside {root} (a symlink or '..'); mnistconv reads "
                           "only inside the tree it is given",
                     "copy the file into the tree, or name it on its own")


def _refuse_special(path, st):
    if stat.S_ISLNK(st.st_mode):
        raise UsageError(path, "is a dangling symlink", "point it at a file, or remove it")
    raise UsageError(path, "is not a regular file (device, FIFO or socket)",
                     "name a regular file or a directory")


def check_input(path: str, root: Optional[str] = None, kind: str = "file") -> os.stat_result:
    """The one guard before anything under an input is read: path (kind "file", "dir"
    or "any") is a regular file or directory and, with root (see input_root), does not
    lead outside it through a symlink or '..'. Returns its stat; raises naming path."""
    path = os.fspath(path)
    if root is not None and _outside(path, root):
        _refuse_outside(path, root)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.lexists(path):
            _refuse_special(path, os.lstat(path))
        raise NotFound(path, "no such file or directory") from None
    except OSError as e:
        raise NoAccess(path, e.strerror or str(e)) from None
    is_dir, is_file = stat.S_ISDIR(st.st_mode), stat.S_ISREG(st.st_mode)
    if not (is_dir or is_file):
        _refuse_special(path, st)
    if kind == "file" and is_dir:
        raise UsageError(path, "is a directory, expected a file", "name a file inside it")
    if kind == "dir" and is_file:
        raise UsageError(path, "is a file, expected a directory", "name the directory that holds it")
    return st


def check_input_file(path: str, root: Optional[str] = None) -> int:
    """check_input for a file; returns its size."""
    return check_input(path, root).st_size


# Folders found inside a root, by (folder, root, device, inode): a swapped one is rechecked.
_INSIDE = {}


def _check_folder(path, root):
    """Refuse path when its folder leads outside root (one stat once checked)."""
    folder = os.path.dirname(path) or os.curdir
    try:
        st = os.stat(folder)
    except OSError:
        return check_input(path, root)  # says what is wrong with it
    key = (folder, root, st.st_dev, st.st_ino)
    if key not in _INSIDE:
        if _outside(folder, root):
            _refuse_outside(path, root)
        if len(_INSIDE) > 4096:
            _INSIDE.clear()
        _INSIDE[key] = True


def open_input(path: str, root: Optional[str] = None, mode: str = "rb",
               **text_options: Any) -> IO:
    """Open an input file for reading, the one way the package does: confined to root
    (see check_input), a regular file checked on the open descriptor (nothing swapped
    in after a check is read), never blocking. mode "rb" or "r" with text_options."""
    path = os.fspath(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    if root is not None:
        _check_folder(path, root)
        flags |= os.O_NOFOLLOW  # the file itself a link: checked whole, below
    try:
        fd = os.open(path, flags)
    except OSError as e:
        check_input(path, root)  # a clear message for what is there; a link must stay inside
        if root is None or not os.path.islink(path):
            raise NoAccess(path, e.strerror or str(e)) from None
        return open_input(path, None, mode, **text_options)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(path, "is a directory, expected a file", "name a file inside it")
        _refuse_special(path, st)
    os.set_blocking(fd, True)
    return os.fdopen(fd, mode, **text_options)


def open_output_file(path: str, root: str) -> Optional[IO[bytes]]:
    """Open a file of an output to read it back (a progress record, a finished shard),
    None when there is none: a regular file below root, itself not a link (nothing in
    an output tree is followed, house rule 12), checked on the open descriptor and never
    blocking (a FIFO or a device in its place is refused, one line)."""
    path = os.fspath(path)
    check_output_path(path, root)  # no folder on the way is a link
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
                     | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as e:
        if os.path.islink(path):
            raise UsageError(path, "is a symlink inside the output; mnistconv never reads "
                                   "an output back through a link",
                             "remove the link, or use --force to start over") from None
        raise NoAccess(path, e.strerror or str(e)) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(path, "is a directory, where the output has a file",
                             "move it away, or use --force to start over")
        raise UsageError(path, "is not a regular file (device, FIFO or socket), where "
                               "the output has a file", "remove it, or write to "
                               "another output")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def output_digest(path: str, root: str, chunk: int = 1 << 20) -> Optional[tuple]:
    """(bytes, SHA-256) of a file of an output read back (open_output_file), a chunk at a
    time; None when there is none."""
    f = open_output_file(path, root)
    if f is None:
        return None
    h, n = hashlib.sha256(), 0
    with f:
        while block := f.read(chunk):
            h.update(block)
            n += len(block)
    return n, h.hexdigest()


def read_output_file(path: str, root: str, limit: int) -> Optional[bytes]:
    """The first limit + 1 bytes of a small file of an output (open_output_file), None
    when there is none: more than limit bytes says it is too large, and nothing larger
    is read into memory."""
    f = open_output_file(path, root)
    if f is None:
        return None
    with f:
        return f.read(limit + 1)


def input_entries(directory: str, root: Optional[str] = None,
                  keep: Optional[Callable[[str], Any]] = None, kind: str = "any",
                  leave_out_refused: bool = False) -> list:
    """The entries of an input directory that keep(name) accepts (default: not hidden or
    staging), sorted, each checked like check_input; kind "file" or "dir" leaves out
    the other kind. The walker every tree reader uses; root defaults to directory.
    leave_out_refused: an entry check_input refuses is left out, not an error."""
    directory = os.fspath(directory)
    root = directory if root is None else root
    check_input(directory, root, "dir")
    keep = keep or (lambda name: not name.startswith(".") and STAGING_MARK not in name)
    try:
        with os.scandir(directory) as scan:
            entries = sorted((e for e in scan if keep(e.name)), key=lambda e: e.name)
    except OSError as e:
        raise NoAccess(directory, e.strerror or str(e)) from None
    found = []
    for e in entries:
        try:
            is_dir = _entry_is_dir(e, root)
        except (UsageError, NotFound, NoAccess):
            if leave_out_refused:
                continue
            raise
        if kind == "any" or (kind == "dir") == is_dir:
            found.append(e.path)
    return found


def _entry_is_dir(e, root) -> bool:
    """Whether a listed entry is a folder; refused as check_input refuses it."""
    # The listing's own types (no system call) for plain entries; links resolved.
    if e.is_symlink():
        return stat.S_ISDIR(check_input(e.path, root, "any").st_mode)
    if e.is_dir(follow_symlinks=False):
        return True
    if e.is_file(follow_symlinks=False):
        return False
    try:
        _refuse_special(e.path, os.lstat(e.path))
    except FileNotFoundError:
        raise NotFound(e.path, "no such file or directory") from None
    return False


def input_files_under(directory: str, root: Optional[str] = None) -> list:
    """Every file under an input directory, depth first in name order, each checked as
    input_entries checks it (hidden and staging names left out, as readers leave them;
    a link leaving root, a FIFO, device or socket refused). A folder reached twice (a
    link back up the tree) is walked once."""
    directory = os.fspath(directory)
    root = directory if root is None else root
    files: list = []
    seen = set()
    stack = [directory]
    while stack:
        folder = stack.pop()
        st = check_input(folder, root, "dir")
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        folders = []
        for path in input_entries(folder, root):
            if stat.S_ISDIR(check_input(path, root, "any").st_mode):
                folders.append(path)
            else:
                files.append(path)
        stack.extend(reversed(folders))
    return files


def input_size(path: str, root: Optional[str] = None) -> int:
    """The size of an input file, checked as open_input checks it (no read)."""
    return check_input_file(path, root)


@contextmanager
def library_path(path: str, root: Optional[str] = None) -> Iterator[str]:
    """A name for a library that opens files only by name (liblmdb, HDF5, array_record,
    pyarrow): the file is opened through open_input (confined, a regular file, never a
    FIFO) and the library is handed /proc/self/fd/N, that very file, so nothing swapped
    in after the check is what it opens. Use the name inside the `with` only: the
    library opens its own descriptor there and keeps it after."""
    with open_input(path, root) as f:
        fd_path = f"/proc/self/fd/{f.fileno()}"
        yield fd_path if os.path.exists(fd_path) else path  # no /proc: the checked name


def file_digest(path: str, root: Optional[str] = None, chunk: int = 1 << 20) -> tuple:
    """(bytes, SHA-256 in hex) of a file, read through open_input (confined to root, a
    regular file: a FIFO or device is refused, never read), size and hash from the
    same descriptor."""
    h = hashlib.sha256()
    with open_input(path, root) as f:
        size = os.fstat(f.fileno()).st_size
        while block := f.read(chunk):
            h.update(block)
    return size, h.hexdigest()


def has_magic(path: str, magic: bytes, offset: int = 0, root: Optional[str] = None) -> bool:
    """Whether the file at path holds `magic` at `offset` (False for a directory or a
    missing file; a device, FIFO or a link out of root is refused)."""
    if not os.path.lexists(path) or os.path.isdir(path):
        return False
    try:
        with open_input(path, root) as f:
            f.seek(offset)
            return f.read(len(magic)) == magic
    except OSError:
        return False


def fast_zlib() -> tuple[Any, tuple]:
    """(zlib module, its errors): zlib-ng's when installed, else the standard one. For
    reading only: written streams keep the standard zlib's bytes."""
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        return zlib, (zlib.error,)
    return zlib_ng, (zlib.error, zlib_ng.error)


class InputFile:
    """A binary input (open_input), decompressed if it is gzip; gzip failures and short
    reads are FormatErrors naming the file."""

    # The compression the errors name; a subclass that decompresses more sets its own.
    kind = "gzip"

    def __init__(self, path: str, raw: Optional[IO[bytes]] = None, root: Optional[str] = None):
        self.path = str(path)
        self.raw = raw = open_input(self.path, root) if raw is None else raw
        self.compressed = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        if self.compressed:
            module, self.errors = fast_zlib()
            gzip_file: Any = gzip.GzipFile
            if module is not zlib:  # zlib-ng's: the same bytes and errors, a reader in C
                from zlib_ng import gzip_ng
                gzip_file = gzip_ng.GzipFile
            self.file = gzip_file(fileobj=raw, mode="rb")
            self.errors += _GZIP_ERRORS
        else:
            self.file, self.errors = raw, _GZIP_ERRORS

    def size(self) -> int:
        """Size of the raw (possibly compressed) file in bytes."""
        return os.fstat(self.raw.fileno()).st_size

    def read(self, n: int) -> bytes:
        """Up to n bytes of the (decompressed) data; b"" at its end."""
        try:
            return self.file.read(n)
        except self.errors as e:
            raise CorruptData(self.path, f"not a valid {self.kind} stream ({e})") from None

    def read_exact(self, n: int, what: str) -> bytes:
        """Exactly n bytes, or a FormatError saying which part (`what`) is truncated."""
        data = self.read(n)
        if len(data) != n:
            raise Truncated(self.path, f"truncated {what}: expected {n} bytes, "
                                       f"found {len(data)}")
        return data

    def readinto_full(self, buffer: Any) -> int:
        """Fill a writable buffer as far as the data goes; returns the bytes filled."""
        view = memoryview(buffer)
        if view.nbytes == 0:  # cast() refuses views with a zero in their shape
            return 0
        view = view.cast("B")
        filled = 0
        try:
            while filled < len(view):
                got = self.file.readinto(view[filled:])
                if not got:
                    break
                filled += got
        except self.errors as e:
            raise CorruptData(self.path, f"not a valid {self.kind} stream ({e})") from None
        return filled

    def expect_end(self) -> None:
        """Raise if anything follows the data the header declared."""
        if self.read(1):
            raise CorruptData(self.path, "trailing bytes after the data the header declares")

    def seek(self, pos: int) -> None:
        """Move to a byte position of the (decompressed) data."""
        self.file.seek(pos)

    def close(self) -> None:
        """Close the decompressor and the file under it."""
        self.file.close()
        self.raw.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# False inside unhashed_outputs(): written files are counted, not hashed.
_HASH_OUTPUTS = ContextVar("mnistconv_hash_outputs", default=True)


def unhashed_outputs() -> ContextManager[None]:
    """Within this block, written files are counted, not hashed (OutputFile.sha256 is
    None): for callers that will not show the hashes.

        with unhashed_outputs():
            mnistconv.write(ds, "out.tfrecord", "tfrecord")  # files' sha256: None
    """
    return hashed_outputs(False)


@contextmanager
def hashed_outputs(on: bool = True) -> Iterator[None]:
    """Within this block, written files are hashed (on=True) or only counted, whatever an
    enclosing block said (metadata that needs SHA-256 gets it as written)."""
    token = _HASH_OUTPUTS.set(on)
    try:
        yield
    finally:
        _HASH_OUTPUTS.reset(token)


class HashingWriter:
    """Wraps a binary file: counts and hashes what is written (see unhashed_outputs())."""

    def __init__(self, file: IO[bytes]):
        self.file = file
        self.hash = hashlib.sha256() if _HASH_OUTPUTS.get() else None
        self.bytes = 0

    def write(self, data: Any) -> int:
        """Write data to the wrapped file, counting and hashing it."""
        if self.hash is not None:
            self.hash.update(data)
        self.bytes += len(data)
        return self.file.write(data)

    def sha256(self):
        """SHA-256 of everything written so far, in hex (None when not hashed)."""
        return self.hash.hexdigest() if self.hash is not None else None


def sha256_file(path: str, chunk: int = 1 << 20, root: Optional[str] = None) -> str:
    """SHA-256 of a file in hex, read a chunk at a time (memory stays small) through
    open_input (a FIFO or device is refused, never read)."""
    return file_digest(path, root, chunk)[1]


def output_file_info(path: str, writer: Optional[HashingWriter] = None,
                     staged: Optional[str] = None) -> "OutputFile":
    """OutputFile for a written file: from the writer's running hash, else read from
    `staged` (where it is until its commit) or path."""
    from .written import OutputFile
    if writer is not None:
        return OutputFile(str(path), writer.bytes, writer.sha256())
    where = staged or path
    return OutputFile(str(path), os.path.getsize(where),
                      sha256_file(where) if _HASH_OUTPUTS.get() else None)


def write_text_output(path: str, text: str, force: bool = False) -> "OutputFile":
    """A small text output written whole (staged), refused if it exists without force."""
    with StagedOutput(force) as out:
        staged = out.file(path)
        with open(staged, "w", encoding="utf-8") as f:
            f.write(text)
        return output_file_info(path, staged=staged)


# This run's own scratch (a spool, a work folder, a --list-outputs mirror): made here,
# so listed, moved and hashed without an input's confinement, but never through a link.

def own_files_under(folder: str) -> list:
    """Every regular file under a folder this run made, sorted, links not followed."""
    found = []
    for parent, dirs, names in os.walk(folder):
        dirs.sort()
        found += [os.path.join(parent, n) for n in sorted(names)
                  if stat.S_ISREG(os.lstat(os.path.join(parent, n)).st_mode)]
    return found


def own_entries(folder: str) -> list:
    """The names in a folder this run made, sorted."""
    return sorted(os.listdir(folder))


def move_own(src: str, dst: str) -> None:
    """Move a file this run made to another name in its own staging (one rename)."""
    os.replace(src, dst)


def create_new(path: str) -> IO[bytes]:
    """Create a file in this run's own scratch for writing; one already there (or a
    link) is an error (FileExistsError), never overwritten or followed."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o666), "wb")

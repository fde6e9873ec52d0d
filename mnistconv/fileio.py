"""Files in and out: inputs checked and decompressed by content (gzip detected from its
magic, its expansion bounded), hashed outputs, one deterministic gzip writer. Staged
outputs (whole or not at all) are in staging.py; their names are re-exported here.
"""

import gzip
import hashlib
import os
import stat
import struct
import zlib
from contextlib import contextmanager
from contextvars import ContextVar
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Optional

from .errors import CorruptData, NoAccess, NotFound, Truncated, UsageError
# Re-exported (see __all__): formats import what they read and write with from here.
from .staging import (STAGING_MARK, StagedOutput, check_output_path, create_staged,
                      exists_error, is_staging_name, is_stdio, is_stream_path,
                      open_staged, output_entries, refuse_replacing_special,
                      remove_dead_leftovers, remove_scratch, signals_deferred,
                      staging_prefix)

if TYPE_CHECKING:
    from .records import OutputFile

__all__ = [
    "GZIP_MAGIC", "GZIP_MAX_RATIO", "check_input", "check_input_file", "has_magic",
    "input_entries", "input_root", "open_input", "fast_zlib", "InputFile",
    "HashingWriter", "DeflateWriter", "sha256_file", "output_file_info", "unhashed_outputs",
    "hashed_outputs",
    "STAGING_MARK", "StagedOutput", "check_output_path", "create_staged", "exists_error",
    "is_staging_name", "is_stdio", "is_stream_path", "open_staged", "output_entries",
    "refuse_replacing_special", "remove_dead_leftovers", "remove_scratch",
    "signals_deferred", "staging_prefix"]

GZIP_MAGIC = b"\x1f\x8b"
# Deflate expands at most 1032:1 (a 258-byte match per ~2 bits), so a gzip file of n
# bytes cannot hold more than this many times n: a header declaring more is lying.
GZIP_MAX_RATIO = 1032
_GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)


def input_root(path: str) -> str:
    """The tree a named input confines its reads to: the directory itself, or the
    folder of a file (its side files, shards and siblings live there), resolved.

        input_root("data/mnist")                  # '/home/me/data/mnist'
        input_root("data/train-images-idx3-ubyte")  # '/home/me/data'
    """
    path = os.fspath(path)
    return os.path.realpath(path if os.path.isdir(path) else os.path.dirname(path) or ".")


# Resolving through an O_PATH descriptor and /proc costs three system calls whatever
# the depth; os.path.realpath makes one per component (most of a small file's open).
_PROC_FD = hasattr(os, "O_PATH") and os.path.isdir("/proc/self/fd")


def _real(path):
    """path with every link and '..' resolved (os.path.realpath's answer)."""
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


def _outside(path, root) -> bool:
    """Whether path, its links and '..' resolved, lies outside the directory root."""
    real, root = _real(path), _real(root)
    return real != root and not real.startswith(root.rstrip(os.sep) + os.sep)


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
    or "any") exists, is a regular file or directory, not a device, FIFO or socket,
    and, when root (a directory: what the user named, see input_root) is given, does
    not lead outside it through a symlink or '..'. A link that stays inside is fine.
    Returns its stat (links followed); raises UsageError naming path.

        check_input("data/mnist/train/3", root="data/mnist", kind="dir")
    """
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
    """A readable regular file inside root (see check_input), or a clear error
    (directories, devices, FIFOs, missing, a link out of the tree); returns its size."""
    return check_input(path, root).st_size


# Folders already found inside a root, by (folder, root, device, inode): a folder
# swapped for a link since is another inode, so it is checked again.
_INSIDE = {}


def _check_folder(path, root):
    """Refuse path (naming it) when its folder leads outside root; one stat when that
    folder was checked before."""
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
    (see check_input), a regular file (not a FIFO, device or socket, checked on the
    open descriptor, so nothing swapped in after a check is read), never blocking on a
    FIFO. mode "rb" or "r" (then text_options: encoding, errors, newline).

        with open_input("data/mnist/classes.txt", root="data/mnist", mode="r",
                        encoding="utf-8") as f: ...
    """
    path = os.fspath(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    if root is not None:
        _check_folder(path, root)
        flags |= os.O_NOFOLLOW  # the file itself a link: checked whole, below
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if root is None or not os.path.islink(path):
            check_input(path, root)  # a clear message for what is there, if anything
            raise NoAccess(path, e.strerror or str(e)) from None
        check_input(path, root)  # a link: where it leads must be inside root
        return open_input(path, None, mode, **text_options)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        if stat.S_ISDIR(st.st_mode):
            raise UsageError(path, "is a directory, expected a file", "name a file inside it")
        _refuse_special(path, st)
    os.set_blocking(fd, True)
    return os.fdopen(fd, mode, **text_options)


def input_entries(directory: str, root: Optional[str] = None,
                  keep: Optional[Callable[[str], Any]] = None, kind: str = "any") -> list:
    """The entries of an input directory that keep(name) accepts (default: all but
    hidden and staging names), sorted by name, each checked like check_input (kind:
    "file", "dir" or "any": entries of the other kind are left out): the walker every
    reader of a tree uses, so a link out of the tree, a FIFO or a device among them is
    refused, never followed or read. root defaults to directory itself.

        input_entries("out/images/train", kind="dir")   # ['out/images/train/0', ...]
    """
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
        # The listing's own types (no system call) for plain entries; links resolved.
        if e.is_symlink():
            is_dir = stat.S_ISDIR(check_input(e.path, root, "any").st_mode)
        elif e.is_dir(follow_symlinks=False):
            is_dir = True
        elif e.is_file(follow_symlinks=False):
            is_dir = False
        else:
            _refuse_special(e.path, os.lstat(e.path))
        if kind == "any" or (kind == "dir") == is_dir:
            found.append(e.path)
    return found


def has_magic(path: str, magic: bytes, offset: int = 0, root: Optional[str] = None) -> bool:
    """Whether the file at path holds `magic` at `offset`: a format's sniff by content.
    False, not an error, for a directory or a missing file; a device, FIFO or a link
    out of root is refused (see check_input).

        has_magic("train-00000-of-00001.parquet", b"PAR1")   # True
    """
    if not os.path.lexists(path) or os.path.isdir(path):
        return False
    try:
        with open_input(path, root) as f:
            f.seek(offset)
            return f.read(len(magic)) == magic
    except OSError:
        return False


def fast_zlib() -> tuple[Any, tuple]:
    """(zlib module, the errors it raises): zlib-ng's when installed, whose inflate is
    about twice as fast, else the standard library's. For reading only: written
    gzip/zlib streams stay the standard zlib's, whose bytes are the ones tests and
    users compare against."""
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        return zlib, (zlib.error,)
    return zlib_ng, (zlib.error, zlib_ng.error)


def _gzip_reader():
    """(GzipFile class, the errors it raises): zlib-ng's gzip_ng when installed, the
    same bytes and errors as the standard library's, decompressed faster because its
    reader loop is C, not Python (benchmarks/README.md)."""
    module, errors = fast_zlib()
    if module is zlib:
        return gzip.GzipFile, errors
    from zlib_ng import gzip_ng
    return gzip_ng.GzipFile, errors


class InputFile:
    """A binary input (opened with open_input, confined to root when given),
    decompressed if it is gzip, that turns gzip failures and short reads into
    FormatError naming the file."""

    # The compression the errors name; a subclass that decompresses more sets its own.
    kind = "gzip"

    def __init__(self, path: str, raw: Optional[IO[bytes]] = None, root: Optional[str] = None):
        self.path = str(path)
        if raw is None:
            raw = open_input(self.path, root)
        self.raw = raw
        self.compressed = raw.read(2) == GZIP_MAGIC
        raw.seek(0)
        if self.compressed:
            gzip_file, self.errors = _gzip_reader()
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
        """Exactly n bytes, or a FormatError saying which part (`what`, e.g. "header")
        is truncated."""
        data = self.read(n)
        if len(data) != n:
            raise Truncated(self.path, f"truncated {what}: expected {n} bytes, "
                                       f"found {len(data)}")
        return data

    def readinto_full(self, buffer: Any) -> int:
        """Fill a writable buffer (a numpy array's memory) as far as the data goes;
        returns the number of bytes filled (short only at the end of the data)."""
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


@contextmanager
def unhashed_outputs() -> Iterator[None]:
    """Within this block, files written through HashingWriter or described by
    output_file_info() are not hashed: their OutputFile.sha256 is None. For callers
    that will not show the hashes: the command line with -q and neither --json nor
    --sha256sums (SHA-256 is a noticeable share of a conversion: benchmarks/README.md).
    Hashes are on by default.

        with unhashed_outputs():
            mnistconv.write(ds, "out.tfrecord", "tfrecord")  # files' sha256: None
    """
    with hashed_outputs(False):
        yield


@contextmanager
def hashed_outputs(on: bool = True) -> Iterator[None]:
    """Within this block, written files are hashed (on=True) or only counted, whatever
    an enclosing block said: for an output whose metadata needs its files' SHA-256
    (Parquet's croissant.json), hashed as written rather than read back."""
    token = _HASH_OUTPUTS.set(on)
    try:
        yield
    finally:
        _HASH_OUTPUTS.reset(token)


class HashingWriter:
    """Wraps a binary file: counts and hashes what is written, so writers can report
    each output's size and SHA-256 without reading it back (only counts inside
    unhashed_outputs())."""

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


_DEFLATE_SLICE = 128 << 10


class DeflateWriter:
    """Deterministic deflate, level 9 (the same bytes whatever the write sizes), in a gzip
    container or, with container="zlib", a ZLIB one. The gzip header is written here:
    1f 8b 08 00, mtime 0, XFL 2, os_byte (3: the bytes of gzip.compress(data, 9, mtime=0)
    and `gzip -9n`; 255: GDMNIST1's, which the published browser-v1 .bin.gz files carry).
        w = DeflateWriter(f, os_byte=255); w.write(b"..."); w.close()  # f stays open"""

    def __init__(self, file: Any, container: str = "gzip", os_byte: int = 3):
        self.file, self.gzip, self.crc, self.size = file, container == "gzip", 0, 0
        self.zlib = zlib.compressobj(9, zlib.DEFLATED, -15 if self.gzip else 15)
        # Sent with the first output, as zlib's own wrapper did: nothing before a write.
        self.pending = bytes([31, 139, 8, 0, 0, 0, 0, 0, 2, os_byte]) if self.gzip else b""

    def write(self, data):
        """Compress data into the file; returns len(data), as a file's write does."""
        if self.gzip:
            self.crc, self.size = zlib.crc32(data, self.crc), self.size + len(data)
        view = memoryview(data).cast("B")
        # A slice at a time: Ctrl-C is handled between two calls into zlib, and one call
        # on a whole batch at level 9 kept a run going long after it.
        for at in range(0, len(view), _DEFLATE_SLICE):
            self.file.write(self.pending + self.zlib.compress(view[at:at + _DEFLATE_SLICE]))
            self.pending = b""
        return len(view)

    def close(self):
        """End the stream (and the gzip trailer: CRC-32, length), not the file."""
        trailer = struct.pack("<II", self.crc, self.size & 0xFFFFFFFF) if self.gzip else b""
        self.file.write(self.pending + self.zlib.flush() + trailer)


def sha256_file(path: str, chunk: int = 1 << 20) -> str:
    """SHA-256 of a file in hex, read a chunk at a time (memory stays small)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def output_file_info(path: str, writer: Optional[HashingWriter] = None,
                     staged: Optional[str] = None) -> "OutputFile":
    """OutputFile for a written file: from the writer's running hash when there is one
    (sha256 None inside unhashed_outputs()), else read from `staged`, where the file is
    until its commit (which one_commit() may hold back), or path."""
    from .records import OutputFile
    if writer is not None:
        return OutputFile(str(path), writer.bytes, writer.sha256())
    where = staged or path
    return OutputFile(str(path), os.path.getsize(where),
                      sha256_file(where) if _HASH_OUTPUTS.get() else None)


def write_text_output(path: str, text: str, force: bool = False) -> "OutputFile":
    """A small text output (a card, croissant.json) written whole: staged and renamed,
    refused over an existing file without force. Its OutputFile."""
    with StagedOutput(force) as out:
        staged = out.file(path)
        with open(staged, "w", encoding="utf-8") as f:
            f.write(text)
        return output_file_info(path, staged=staged)

"""numpy arrays read from .npy members of a zip archive (an .npz), for the npz and
KMNIST readers: each member's sizes and header are checked before they size an
allocation, and a corrupt archive is one FormatError naming the file.
"""

import contextlib
import warnings
import zipfile
import zlib

import numpy as np

from ..errors import CorruptData, FormatError, Truncated
from ..io.fileio import GZIP_MAX_RATIO, input_size
from ..model.records import Batch

ZIP_MAGIC = b"PK\x03\x04"
# Images and labels are numbers: bool, integers, floats (no strings, records, dates).
NUMERIC_KINDS = "biuf"
# What zipfile and zlib raise for a corrupt archive (some only at a member's end).
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError,
               NotImplementedError, RuntimeError, UnicodeDecodeError)



@contextlib.contextmanager
def zip_errors(path):
    """Within it, a corrupt archive is a FormatError naming `path`."""
    try:
        yield
    except _ZIP_ERRORS as e:
        raise FormatError(path, f"not a valid npz (zip) file ({e})",
                          "check that numpy wrote it whole, or pass format= to read it as "
                          "another format", cli_hint="check that numpy wrote it whole, or "
                          "name its format with --from") from None


def check_sizes(archive, info, path):
    """Bound what a member's sizes may claim: a stored member holds exactly its
    compressed bytes, deflate expands at most 1032:1, and none exceeds the archive."""
    if info.flag_bits & 0x1:
        raise FormatError(path, f"member {info.filename} is encrypted",
                          "save the arrays again with numpy.savez (numpy never encrypts)")
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise FormatError(path, f"member {info.filename} uses zip compression method "
                                f"{info.compress_type}", "numpy writes stored or deflated "
                                                         "members only")
    limit = info.compress_size * (GZIP_MAX_RATIO if info.compress_type else 1)
    if info.compress_size > input_size(path) or info.file_size > limit:
        raise CorruptData(path, f"member {info.filename} declares {info.file_size} bytes "
                                f"in {info.compress_size} compressed, which cannot be")


def read_npy_header(f):
    """(shape, fortran_order, dtype) of the .npy header at f's position, as numpy reads it.
    numpy warns (a UserWarning, and Python a DeprecationWarning for odd escapes) when a
    header needs Python 2 era repairs, which it makes: the header is read all the same,
    and a command line that promised one line per problem prints nothing extra.
    ValueError, SyntaxError etc. for a header numpy cannot read."""
    version = np.lib.format.read_magic(f)
    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                   else np.lib.format.read_array_header_2_0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", SyntaxWarning)
        return read_header(f)


def open_member(archive: zipfile.ZipFile, name, path):
    """Open a member and parse its .npy header: (file, shape, dtype, fortran_order)."""
    info = archive.getinfo(name)
    check_sizes(archive, info, path)
    f = archive.open(info)
    try:
        shape, fortran, dtype = read_npy_header(f)
    except Exception as e:  # numpy raises ValueError/OSError/SyntaxError for bad headers
        f.close()
        reason = " ".join(str(e).split())  # numpy's messages span several lines
        raise CorruptData(path, f"member {name} is not a valid .npy array ({reason})") \
            from None
    if dtype.hasobject:
        f.close()
        raise FormatError(path, f"member {name} holds Python objects (pickled)",
                          "mnistconv reads only plain numeric arrays")
    if dtype.kind not in NUMERIC_KINDS or dtype.names is not None:
        f.close()
        raise FormatError(path, f"member {name} holds {dtype.str} values, not numbers",
                          "mnistconv reads only plain numeric arrays")
    declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
    holds = info.file_size - f.tell()
    if declared != holds:
        f.close()
        raise CorruptData(path, f"member {name}: its .npy header declares shape {shape} "
                                f"{dtype.name} ({declared} bytes), the member holds {holds}")
    return f, shape, dtype, fortran


def read_member(archive, name, path, check=None):
    """A whole member in its own order, read 1 MiB at a time (zipfile copies through a
    bytes object of the size asked for); check(part, first_item) sees each part."""
    f, shape, dtype, fortran = open_member(archive, name, path)
    with f:
        data = np.empty(shape, dtype, order="F" if fortran else "C")
        want = data.nbytes
        flat = memoryview(data.reshape(-1, order="A")).cast("B") if want else None
        step = 1 << 20  # a whole number of items: item sizes are powers of two
        got = 0
        while got < want:
            n = f.readinto(flat[got:got + step])
            if n and check:
                check(data[got // dtype.itemsize:(got + n) // dtype.itemsize],
                      got // dtype.itemsize)
            if not n:
                break
            got += n
        if got != want:
            raise Truncated(path, f"member {name} is truncated: {got} of {want} bytes")
    return data


def row_batches(f, header, labels, batch_size, path, what):
    """Batches read from `f`, a C-order .npy member past its header (`what` names it)."""
    for start in range(0, header.count, batch_size):
        n = min(batch_size, header.count - start)
        data = np.empty((n,) + header.shape, header.dtype)
        got = f.readinto(memoryview(data).cast("B")) if data.nbytes else 0
        if got != data.nbytes:
            raise Truncated(path, f"{what} is truncated at row {start}")
        yield Batch(data, labels[start:start + n],
                    np.arange(start, start + n, dtype=np.int64))

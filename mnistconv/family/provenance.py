"""Which published dataset (a sources.py family) a dataset was read from, for what
describes an output (identity.py: croissant.json, the card, TFDS and Parquet metadata).
Proof only (house rule 15): every file the dataset was read from must be one of the same
family's published files, by its published digest or, for a copy decompressed or
recompressed, by the SHA-256 of its content. Class names and file names prove nothing:
ten digit names or a file called emnist-... can label anything.

Only files whose size is a published file's (or whose gzip trailer gives a published
content size) are hashed, so an input that is not one costs a stat per file.
"""

import gzip
import hashlib
import os
import struct

from ..errors import MnistconvError
from ..io.fileio import check_input, open_input
from .sources import FAMILIES

_CHUNK = 1 << 20
_cache: dict = {}  # (path, size, mtime_ns) -> family name or None


def _published():
    """[(family, RemoteFile)] of every published file and known sample."""
    return [(family, f) for family in FAMILIES.values()
            for f in family.files + family.samples]


def _gzip_size(path):
    """A gzip file's ISIZE trailer (content bytes mod 2**32), or None."""
    try:
        with open_input(path) as f:
            if f.read(2) != b"\x1f\x8b":
                return None
            f.seek(-4, os.SEEK_END)
            return struct.unpack("<I", f.read(4))[0]
    except (OSError, MnistconvError):
        return None


def _hash(path, decompress, most, with_md5=True):
    """(sha256, md5) of the file's bytes, or of its gzip content (at most `most` bytes
    read: a longer one is not the file sought). with_md5=False: md5 None, for files
    whose candidates all have a SHA-256 (MD5 would double the time of a proof)."""
    sha, md5, seen = hashlib.sha256(), hashlib.md5() if with_md5 else None, 0
    try:
        with open_input(path) as raw:
            f = gzip.GzipFile(fileobj=raw) if decompress else raw
            while True:
                block = f.read(_CHUNK)
                if not block:
                    break
                seen += len(block)
                if seen > most:
                    return None, None
                sha.update(block)
                if md5 is not None:
                    md5.update(block)
    except (OSError, EOFError, MnistconvError, gzip.BadGzipFile):
        return None, None
    return sha.hexdigest(), md5.hexdigest() if md5 is not None else None


def _family_of_file(path):
    """The family one of whose published files this file is, or None."""
    try:
        st = check_input(path)
    except MnistconvError:  # not a regular file to look up
        return None
    key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
    if key in _cache:
        return _cache[key]
    found = None
    candidates = _published()
    as_is = [(fam, f) for fam, f in candidates if st.st_size in (f.size, f.content_size)]
    if as_is:
        by_md5 = any(f.md5 and not (f.sha256 or f.content_sha256) for _, f in as_is)
        sha, md5 = _hash(path, False, st.st_size, with_md5=by_md5)
        found = next((fam.name for fam, f in as_is
                      if sha in (f.sha256, f.content_sha256) or
                      (md5 is not None and md5 == f.md5)), None)
    if found is None:
        isize = _gzip_size(path)
        inner = [(fam, f) for fam, f in candidates if f.content_sha256 and
                 f.content_size is not None and isize == f.content_size % (1 << 32)]
        if inner:
            sha, _ = _hash(path, True, max(f.content_size for _, f in inner),
                           with_md5=False)  # content is matched by SHA-256 only
            found = next((fam.name for fam, f in inner if sha == f.content_sha256), None)
    _cache[key] = found
    return found


def family_of(dataset):
    """The sources.Family whose published files every file the dataset was read from
    is, or None (a directory, a file of anything else, or files of two families)."""
    paths = [str(p) for p in dataset.paths]
    if not paths or not all(os.path.isfile(p) for p in paths):
        return None
    names = {_family_of_file(p) for p in paths}
    if len(names) != 1 or None in names:
        return None
    return FAMILIES[names.pop()]

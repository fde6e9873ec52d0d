"""Whether a file is a family's published file (sources.RemoteFile): its published
digests, or for a copy recompressed or gunzipped since, its content's SHA-256 (what
`download --verify-only` and a download from any mirror accept). download.py fetches;
this module only reads and hashes.
"""

import hashlib
import os
import zlib
from dataclasses import dataclass, field

from ..io.fileio import open_input
from ..model.records import NO_PROGRESS


@dataclass
class Result:
    """One file of a family after download or verification."""
    path: str
    action: str  # downloaded | present | extracted | verified | missing | invalid
    bytes: int = 0
    sha256: str = ""
    url: str = ""
    problem: str = ""  # for missing/invalid (verify only)
    digests: dict = field(default_factory=dict)
    check: str = ""  # for verified/present: which digest matched, e.g. "archive sha256 matches"


def hashers():
    """A fresh md5 and sha256, the digests the publishers give."""
    return {"md5": hashlib.md5(), "sha256": hashlib.sha256()}


def check_digests(spec, hexes):
    """The first published digest that does not match, as a message, else None."""
    for alg, expected in spec.digests():
        if hexes[alg] != expected.lower():
            return f"checksum mismatch: expected {alg} {expected}, got {hexes[alg]}"
    return None


def file_digests(path, progress=NO_PROGRESS, description=None):
    """(bytes, {algorithm: hex digest}) of a file, read through the guarded opener."""
    running = hashers()
    with open_input(path) as f:
        size = os.fstat(f.fileno()).st_size
        progress.start(description or os.path.basename(path), size)
        try:
            while block := f.read(1 << 20):
                for h in running.values():
                    h.update(block)
                progress.advance(len(block))
        finally:
            progress.finish()
    return size, {alg: h.hexdigest() for alg, h in running.items()}


def check_file(spec, path, progress=NO_PROGRESS) -> Result:
    """Is path the published file, or its content regzipped or gunzipped? A Result."""
    if not os.path.lexists(path):
        return Result(path, "missing", problem="missing")
    if not os.path.isfile(path):
        return Result(path, "invalid", problem="is not a regular file")
    size, hexes = file_digests(path, progress, f"check {spec.name}")
    problem = check_digests(spec, hexes)
    if not problem:
        return Result(path, "verified", size, hexes["sha256"], digests=hexes,
                      check=f"archive {spec.digests()[0][0]} matches")
    if spec.content_sha256:
        with open_input(path) as f:
            compressed = f.read(2) == b"\x1f\x8b"
        if not compressed:
            # Gunzipped but kept its .gz name: the file is the content itself.
            if hexes["sha256"] == spec.content_sha256:
                return Result(path, "verified", size, hexes["sha256"], digests=hexes,
                              check="uncompressed file, content sha256 matches")
            problem += (f" (nor is it the uncompressed file: expected content sha256 "
                        f"{spec.content_sha256})")
        else:
            content, failure = content_sha256(spec, path, progress)
            if content == spec.content_sha256:
                return Result(path, "verified", size, hexes["sha256"], digests=hexes,
                              check="content sha256 matches (recompressed)")
            problem += f" ({failure})" if failure else (
                f" (decompressed content: sha256 {content}, expected {spec.content_sha256})")
    return Result(path, "invalid", size, hexes["sha256"], problem=problem, digests=hexes)


def content_sha256(spec, path, progress):
    """(sha256 of the decompressed file, None) or (None, why it cannot be the content)."""
    import gzip
    h = hashlib.sha256()
    got = 0
    limit = spec.content_size
    progress.start(f"check {spec.name} content", limit or 0)
    try:
        with open_input(path) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as f:
            while block := f.read(1 << 20 if limit is None else min(1 << 20, limit + 1 - got)):
                h.update(block)
                got += len(block)
                progress.advance(len(block))
                if limit is not None and got > limit:
                    return None, (f"its decompressed content is longer than the official "
                                  f"{limit} bytes")
    except (OSError, EOFError, zlib.error) as e:
        return None, f"and it does not decompress: {e}"
    finally:
        progress.finish()
    return h.hexdigest(), None


def check_present(spec, directory, progress=NO_PROGRESS) -> Result:
    """check_file of spec in directory, or of its uncompressed copy when it is absent."""
    path = os.path.join(directory, spec.name)
    raw = path[:-3] if spec.name.endswith(".gz") else None
    if os.path.lexists(path) or not spec.content_sha256 or not raw \
            or not os.path.lexists(raw):
        return check_file(spec, path, progress)
    if not os.path.isfile(raw):
        return Result(raw, "invalid", problem="is not a regular file")
    size, hexes = file_digests(raw, progress, f"check {os.path.basename(raw)}")
    if hexes["sha256"] == spec.content_sha256:
        return Result(raw, "verified", size, hexes["sha256"], digests=hexes,
                      check="uncompressed file, content sha256 matches")
    return Result(raw, "invalid", size, hexes["sha256"], digests=hexes,
                  problem=f"checksum mismatch: expected content sha256 "
                          f"{spec.content_sha256}, got {hexes['sha256']}")

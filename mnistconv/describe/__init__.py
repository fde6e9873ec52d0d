"""Describing an output: croissant.json, the dataset card (card.py) and SHA256SUMS.

describe() is the one step every runner takes once an output's data is written (the
library's write(), a plan's finishing task, Beam's finishing step), so a planned set
gets the description a local write gives. What it says of a format's files comes from
the format's SPEC (spec.Described), never from its name.
"""

from typing import Any, Optional


def described(fmt, path) -> Optional[Any]:
    """What the description of fmt's output at path says of its files (spec.Described),
    None when it gets none: only a local folder output of a format that declares one
    (one .parquet file is not a folder)."""
    path = str(path)
    if fmt.described is None or "://" in path or path == "-" or \
            (fmt.extensions and path.lower().endswith(fmt.extensions)):
        return None
    return fmt.described


def targets(fmt, path) -> list:
    """The files describe() writes for fmt's output at path (a plan checks and records
    them with its metadata; --list-outputs names them)."""
    from .croissant import target
    return [target(path)] if described(fmt, path) else []


def check(fmt, path, force, options) -> None:
    """Before anything is written: a description already there is refused without
    force, and the identity keywords it states are checked."""
    if described(fmt, path):
        from ..family.identity import given
        from .croissant import check_target
        check_target(path, force)
        given(options)


def describe(dataset, path, files, fmt, options) -> list:
    """Describe fmt's output at path just written (files: its OutputFiles; options: the
    write's, the identity keywords among them): the OutputFiles written."""
    layout = described(fmt, path)
    if layout is None:
        return []
    from . import croissant
    return [croissant.write(dataset, path, files, layout, options)]

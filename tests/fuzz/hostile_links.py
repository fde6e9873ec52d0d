"""Symlink trees, in and out (issue 24, classes 1 and 3): the `links` family, for every
reader. Same rules as hostile.py: a builder takes (rng, work, top) and returns a Case.

In: a valid seed of the reader is copied to work/in and one file or folder below it
(never the path named on the command line: a user may name a link) becomes a symlink.
Out of the tree, to work/outside, its files turned into FIFOs (a reader that opened
one blocks until the watchdog calls it a hang), or to /etc/passwd or /dev/zero: the
run must end in one error line, exit 1 or 2. Inside the tree (to a hidden copy): any
exit the seed gives, but no hang, traceback or write outside the output.

Out: the output given with --force already holds a link to work/victim: a class
folder of an ImageFolder output (refused, exit 2) or an IDX file (replaced, not
followed). The harness's snapshot of everything outside out/ catches any byte written
through the link.
"""

import os
import shutil

try:
    from .hostile import Case
    from .hostile_formats import _copy
except ImportError:
    from hostile import Case
    from hostile_formats import _copy

OUTSIDE_TARGETS = ["/etc/passwd", "/dev/zero", "/"]


def _members(tree, named):
    """Every file and folder below tree, except the path named on the command line."""
    found = []
    for folder, dirs, files in os.walk(tree):
        found += [os.path.join(folder, n) for n in sorted(dirs) + sorted(files)]
    return [m for m in found if os.path.abspath(m) != os.path.abspath(named)]


def _fifos_instead(path):
    files = [path] if not os.path.isdir(path) else \
        [os.path.join(f, n) for f, _, names in os.walk(path) for n in names]
    for f in files:
        os.unlink(f)
        os.mkfifo(f)


def _link(rng, target, link):
    """An absolute or a relative symlink at link to target."""
    if rng.random() < 0.5:
        target = os.path.relpath(target, os.path.dirname(link))
    os.symlink(target, link)


def _output_case(rng, work, path):
    victim = os.path.join(work, "victim")
    os.makedirs(victim)
    with open(os.path.join(victim, "keep.png"), "wb") as f:
        f.write(b"not yours")
    out = os.path.join(work, "out", "o")
    if rng.random() < 0.6:
        folder = os.path.join(out, rng.choice(["train", "test"]))
        os.makedirs(folder)
        _link(rng, victim, os.path.join(folder, str(rng.randrange(10))))
        return Case(path, "ImageFolder output with a class folder linked to a victim, "
                          "--force", extra_args=["--force"], commands=("imagefolder",))
    os.makedirs(out)
    _link(rng, os.path.join(victim, "keep.png"),
          os.path.join(out, rng.choice(["train-images-idx3-ubyte",
                                        "t10k-labels-idx1-ubyte"])))
    return Case(path, "IDX output with a file linked to a victim, --force",
                extra_args=["--force"], commands=("idx",))


def links_builder(reader):
    def build(rng, work, top):
        path = _copy(rng, reader, work)
        tree = path if os.path.isdir(path) else os.path.dirname(path)
        members = _members(tree, path)
        if not members or rng.random() < 0.25:
            return _output_case(rng, work, path)
        member = rng.choice(members)
        shown = os.path.relpath(member, work)
        kind = rng.random()
        if kind < 0.6:
            away = os.path.join(work, "outside", os.path.basename(member))
            os.makedirs(os.path.dirname(away), exist_ok=True)
            shutil.move(member, away)
            _fifos_instead(away)
            _link(rng, away, member)
            return Case(path, f"{shown} linked out of the tree to FIFOs",
                        expect_code=(1, 2))
        if kind < 0.8:
            target = rng.choice(OUTSIDE_TARGETS)
            if os.path.isdir(member):
                shutil.rmtree(member)
            else:
                os.unlink(member)
            os.symlink(target, member)
            return Case(path, f"{shown} linked to {target}", expect_code=(1, 2))
        hidden = os.path.join(tree, f".moved-{rng.randrange(1000)}")
        shutil.move(member, hidden)
        _link(rng, hidden, member)
        return Case(path, f"{shown} linked to a copy inside the tree")
    return build


def families(readers):
    """{"links": {reader: builder}} for every reader."""
    return {"links": {r: links_builder(r) for r in readers}}

"""One command-line run on one input, in-process, checked the way a user would see it.

A case is a directory `work` holding `in/` (the input), `out/` (the only place the
command may write), `cwd/` (its working directory) and `tmp/` (its TMPDIR). After the run:
- the command ended with exit 0, or 1 (bad data) / 2 (usage) and exactly one line
  `Error: ...` on stderr (an `expect_file` must appear in it); no exception escaped
  main(), no "Traceback" anywhere;
- nothing changed under `top` (a directory above `work`, deep enough that `../..`
  chains from the output stay inside it) except inside `out/`; cwd/ and tmp/ are empty;
- a failed command left nothing in out/ (outputs appear whole or not at all);
- it ran within the watchdog's seconds and the address-space budget (harness.Bounded).

Used by the default-pass cut test in-process, and by worker.py for the long pass.
"""

import contextlib
import io
import os
import tempfile
import traceback

try:  # worker.py imports this module as a top-level module, pytest as tests.fuzz.runner
    from .harness import Bounded, Hang, scratch_dir  # noqa: F401 (scratch_dir: for users)
except ImportError:
    from harness import Bounded, Hang, scratch_dir  # noqa: F401


def new_work(top, name):
    work = os.path.join(str(top), name)
    for sub in ("in", "out", "cwd", "tmp"):
        os.makedirs(os.path.join(work, sub))
    return work


def snapshot(root, skip):
    """{relative path: (kind, size, mtime)} of everything under root but `skip`."""
    found = {}
    for folder, dirs, files in os.walk(root):
        if os.path.abspath(folder) == os.path.abspath(skip):
            dirs[:] = []
            continue
        for name in dirs + files:
            full = os.path.join(folder, name)
            st = os.lstat(full)
            kind = "dir" if name in dirs and not os.path.islink(full) else "file"
            found[os.path.relpath(full, root)] = \
                (kind, None if kind == "dir" else st.st_size,
                 None if kind == "dir" else st.st_mtime_ns)
    return found


def _listing(path):
    out = []
    for folder, dirs, files in os.walk(path):
        out += [os.path.relpath(os.path.join(folder, n), path) for n in files + dirs]
    return sorted(out)


def _is_failed_report(args, out, stderr):
    """`verify` that ran and found problems: with --json a report on stdout whose "ok" is
    false and nothing on stderr; without, one `Error: ` line per failed check."""
    if "--json" in args:
        import json
        try:
            report = json.loads(out.getvalue() if hasattr(out, "getvalue") else out)
        except ValueError:
            return False
        return isinstance(report, dict) and report.get("ok") is False and not stderr
    lines = stderr.splitlines()
    return bool(lines) and all(line.startswith("Error: ") for line in lines)


def run_cli(args, work, top=None, seconds=None, budget=None, expect_file=None,
            expect_code=None):
    """Run mnistconv.cli.main(args) with cwd and TMPDIR inside `work`. Returns
    (code, stdout, stderr, problems): problems is a list of strings, empty when the run
    behaved."""
    from mnistconv.cli import main
    top = str(top or work)
    out_dir = os.path.join(work, "out")
    before = snapshot(top, out_dir)
    out_before = _listing(out_dir)  # a case may give an output that exists (--force)
    err, out = io.StringIO(), io.StringIO()
    problems = []
    code = None
    old_cwd, old_tempdir, old_env = os.getcwd(), tempfile.tempdir, os.environ.get("TMPDIR")
    bounds = {k: v for k, v in (("seconds", seconds), ("budget", budget)) if v}
    try:
        os.chdir(os.path.join(work, "cwd"))
        tempfile.tempdir = os.environ["TMPDIR"] = os.path.join(work, "tmp")
        with Bounded(**bounds), contextlib.redirect_stderr(err), \
                contextlib.redirect_stdout(out):
            main(list(args))
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else e.code)
    except Hang:
        problems.append(f"hang: still running after {bounds.get('seconds', 'the')} s")
    except MemoryError:
        problems.append("memory: MemoryError (address-space budget exceeded)")
    except BaseException as e:  # what a user would see as a traceback
        problems.append("traceback: " + "".join(
            traceback.format_exception(type(e), e, e.__traceback__)).strip()[-3000:])
    finally:
        os.chdir(old_cwd)
        tempfile.tempdir = old_tempdir
        if old_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old_env
    stderr = err.getvalue()
    if "Traceback" in stderr:
        problems.append("traceback on stderr")
    if code is not None:
        if code not in (0, 1, 2):
            problems.append(f"exit code {code!r}, expected 0, 1 or 2")
        elif code != 0:
            if args and args[0] == "verify" and code == 1 and _is_failed_report(args, out,
                                                                                stderr):
                pass  # verify's answer: a report of the checks that failed, not an error
            elif not (stderr.startswith("Error: ") and stderr.count("\n") == 1
                      and stderr.endswith("\n")):
                problems.append("stderr is not one 'Error: ...' line")
            elif expect_file is not None and str(expect_file) not in stderr:
                problems.append(f"error does not name the file {expect_file}")
            if _listing(out_dir) != out_before:
                problems.append(f"failed but left in the output: {_listing(out_dir)[:5]}")
        if expect_code is not None and code not in expect_code:
            problems.append(f"exit code {code}, expected {' or '.join(map(str, expect_code))}")
    after = snapshot(top, out_dir)
    changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
    if changed:
        problems.append(f"wrote outside the output: {changed[:5]}")
    return code, out.getvalue(), stderr, problems

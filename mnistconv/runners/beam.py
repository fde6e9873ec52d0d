"""A shard plan (mnistconv.runners.plan) run as an Apache Beam pipeline: one element per task,
each writing its shard with the same code as a local run (so the same bytes), then the
finishing step once every shard is written. Every worker opens the input itself (an
InputSpec) and writes beside the output, so both must be paths every worker sees. A
retried or duplicated task is harmless: it rewrites only its own shard.
"""

import contextlib
import json
import logging
import os
import re

from .. import errors
from ..errors import MissingDependency, MnistconvError, UsageError
from ..io.location import Location
from . import plan as plans

_OPTION = re.compile(r"[A-Za-z][A-Za-z0-9_]*=.*", re.S)


def pipeline_flags(beam_options) -> list:
    """Beam's command-line flags from K=V pairs (`runner=DirectRunner`), else UsageError."""
    flags = []
    for option in beam_options or ():
        option = str(option)
        if not _OPTION.fullmatch(option):
            raise UsageError(None, f"--beam-option {option!r} is not K=V",
                             "e.g. --beam-option runner=DirectRunner")
        flags.append("--" + option)
    return flags


def _check_runner(options) -> None:
    """Refuse a runner Beam does not know before anything is planned (Beam's own
    ValueError would come out of the pipeline as a traceback)."""
    from apache_beam.options.pipeline_options import StandardOptions
    from apache_beam.runners.runner import create_runner
    runner = options.view_as(StandardOptions).runner
    if runner is None or not isinstance(runner, str):
        return
    # Looking the name up imports every runner Beam has; their import-time warnings
    # (no Dataflow client) are not this check's to print.
    root, quiet = logging.getLogger(), logging.Filter("not the root logger")
    root.addFilter(quiet)
    try:
        create_runner(runner)
    except (ValueError, ImportError) as e:
        known = str(e).split("Valid values are ", 1)[-1].split(" or the", 1)[0] \
            if "Valid values are " in str(e) else None
        raise UsageError(None, f"--beam-option runner={runner}: Beam has no such runner",
                         f"name one of {known}, or the full name of a PipelineRunner "
                         "subclass" if known else "name a runner Beam knows, e.g. "
                                                  "runner=DirectRunner") from None
    finally:
        root.removeFilter(quiet)


_OPENED: dict = {}


def _opened(source):
    """The dataset of an InputSpec, opened once per worker process and kept."""
    key = repr(vars(source))
    if key not in _OPENED:
        _OPENED[key] = source.open()
    return _OPENED[key]


# A runner passes a worker's failure back as text: a MnistconvError goes as this marker
# and its fields in JSON, so the launcher raises it again, one line.
_FAILED = "mnistconv worker error: "


@contextlib.contextmanager
def _reported():
    try:
        yield
    except MnistconvError as e:
        fields = [type(e).__name__, e.path, e.message, e.hint, e.cli_hint]
        raise RuntimeError(_FAILED + json.dumps(fields)) from None


# Where a DirectRunner logs a worker's failure with its traceback: not shown for a
# MnistconvError, which the launcher raises again in one line.
_FAILURE_LOGGERS = ("apache_beam.runners.common",
                    "apache_beam.runners.portability.local_job_service")


def _raised_again(failure, named):
    """The MnistconvError a worker reported in a runner's failure (relative paths kept)."""
    text = str(failure)
    at = text.find(_FAILED)
    if at < 0:
        return None
    try:
        kind, *fields = json.JSONDecoder().raw_decode(text, at + len(_FAILED))[0]
    except (ValueError, TypeError):
        return None
    cls = getattr(errors, str(kind), None)
    if not (isinstance(cls, type) and issubclass(cls, MnistconvError)) or len(fields) != 4:
        return None
    path = fields[0]
    if isinstance(path, str) and os.path.isabs(path) and any(
            os.path.commonpath([path, os.path.abspath(p)]) == os.path.abspath(p)
            for p in named if not os.path.isabs(p) and not Location(p).remote):
        fields[0] = os.path.relpath(path)
    error = cls.__new__(cls)
    MnistconvError.__init__(error, *fields)
    return error


def _write_task(number, source, path, plan, resume):
    """One element: run task `number` (keep or write its shard, record it). A worker
    builds the plan's job once per element it runs (a task or the finish): a store
    output's private folder lives as long as the run that holds it."""
    with _reported(), plans.PlanRun.of(_opened(source), plan, path) as planned:
        status, written = planned.run_task(number, resume=resume)
    entry = {k: written[k] for k in ("bytes", "sha256", "counters")}
    return number, status, plan["tasks"][number]["shard"], entry


def _finish(results, source, path, plan):
    """After every task: check each shard and finish the set, the tasks' entries taken
    where the record lacks them (a store has no lock: two tasks recording at once may
    lose one's entry)."""
    entries = {shard: entry for _, _, shard, entry in results}
    with _reported(), plans.PlanRun.of(_opened(source), plan, path) as planned:
        finished, missing = planned.finish(entries)
    return {"finished": finished, "missing": missing,
            "tasks": sorted(number for number, *_ in results)}


def run(source, path, format_name, options, beam_options=(), *, resume=False,
        force=False) -> dict:
    """Run the plan of writing source (an InputSpec) to path on Beam, as plan.run does."""
    flags = pipeline_flags(beam_options)
    try:
        import apache_beam as beam
        from apache_beam.options.pipeline_options import PipelineOptions
    except ImportError:
        raise MissingDependency("apache-beam", "beam", "--runner beam") from None
    _check_runner(PipelineOptions(flags))
    dataset = source.open()  # as named: its errors name the input as a local run's do
    named = (source.path, str(path))
    source = plans.InputSpec(Location(source.path).absolute(), source.format,
                             source.read_options, source.select, source.limits)
    with plans.PlanRun(dataset, path, format_name, options) as planned:
        plan = planned.plan
        planned.prepare(force=force, resume=resume)
        at = str(Location(plan["output"]).absolute())  # where every worker finds it

        def quiet(record):
            return _FAILED not in record.getMessage()
        for name in _FAILURE_LOGGERS:
            logging.getLogger(name).addFilter(quiet)
        try:
            with beam.Pipeline(options=PipelineOptions(flags)) as pipeline:
                _ = (pipeline
                     | "Tasks" >> beam.Create(list(range(len(plan["tasks"]))))
                     # Spread the tasks over workers (Create alone may keep them in one bundle).
                     | "Spread" >> beam.Reshuffle()
                     | "Write shards" >> beam.Map(_write_task, source, at, plan, resume)
                     | "All written" >> beam.combiners.ToList()
                     | "Finish" >> beam.Map(_finish, source, at, plan))
        except Exception as failure:  # noqa: BLE001 (a runner's own kinds: see _FAILED)
            error = _raised_again(failure, named)
            if error is None:
                raise
            raise error from None
        finally:
            for name in _FAILURE_LOGGERS:
                logging.getLogger(name).removeFilter(quiet)
        # Where the launcher sees the output too, say how it ended (finishing is idempotent).
        rewritten: list = []
        finished, missing = planned.finish(rewritten=rewritten)
        done = [{"task": n, "shard": t["shard"]} for n, t in enumerate(plan["tasks"])]
        return planned.result(done, finished, missing, rewritten)

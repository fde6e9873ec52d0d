"""The errors the library raises; the CLI turns each into one line and an exit code.

Every failure a user can cause is a MnistconvError, `<file>: <what is wrong>; <what to
do>`, path None only for a bad option; what to do is hint= (`pass force=True`), with
cli_hint= where the command line says it otherwise (`use --force`), else the kind's
`advice` (tests/test_error_advice.py fails on a raise without either).
"""

import importlib
import re
from typing import Optional

# user:password@ in a URL (s3://key:secret@bucket, https://user:pw@host/...).
_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*):([^\s/]*)@")
# Shorter passwords are replaced only where they stand as ':<password>@' (a bare 'a' or
# '12' would be replaced all through the message).
_BARE_SECRET = 4


def redact(text) -> str:
    """text with the password of every URL in it replaced by *** (`https://ann:***@host`),
    and wherever else it appears in text: a store's own message quotes it from the
    bucket name it was given (`Invalid bucket name "key:secret@bucket"`), decoded or not."""
    from urllib.parse import unquote
    text = str(text)
    secrets = {m.group(2) for m in _PASSWORD.finditer(text)} - {"", "***"}
    text = _PASSWORD.sub(r"\1:***@", text)
    for secret in sorted(secrets | {unquote(s) for s in secrets}, key=len, reverse=True):
        text = text.replace(f":{secret}@", ":***@")
        if len(secret) >= _BARE_SECRET:
            text = text.replace(secret, "***")
    return text


class MnistconvError(Exception):
    """A failure a user can cause; exit code 1 (bad data or a failed write)."""

    exit_code = 1
    # A kind's default what-to-do (None: each raise gives one).
    advice: Optional[str] = None
    cli_advice: Optional[str] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "advice" in vars(cls) and not (isinstance(cls.advice, str)
                                          and cls.advice.strip()):
            raise TypeError(f"{cls.__name__}.advice must say what to do")

    def __init__(self, path, message, hint=None, cli_hint=None):
        self.path = str(path) if path is not None else None
        self.message = message
        self.hint = hint if hint else type(self).advice
        self.cli_hint = cli_hint if cli_hint else (None if hint else type(self).cli_advice)
        super().__init__(str(self))

    def _text(self, hint):
        text = f"{self.path}: {self.message}" if self.path else self.message
        return redact(f"{text}; {hint}" if hint else text)

    def __str__(self):
        return self._text(self.hint)

    def cli_message(self):
        """The message as the command line prints it."""
        return self._text(self.cli_hint or self.hint)

    def __reduce__(self):
        # An error raised in a worker process reaches the parent as itself.
        return _rebuild, (type(self), self.path, self.message, self.hint, self.cli_hint)


def _rebuild(cls, path, message, hint, cli_hint=None):
    error = cls.__new__(cls)
    MnistconvError.__init__(error, path, message, hint, cli_hint)
    return error


class FormatError(MnistconvError):
    """The input is not what its format says: bad magic, truncated, inconsistent."""


class CorruptData(FormatError):
    """A checksum or a structure that does not hold: the file was damaged."""

    advice = "the file is damaged: download, copy or convert it again"


class Truncated(FormatError):
    """The file ends before its content does: cut short in a download or a copy."""

    advice = "the file is cut short: download or copy it again"


class WrongFormat(FormatError):
    """The file is not in the format it is read as: a wrong path or a wrong format."""

    advice = "check the path, or pass format= to read it as another format"
    cli_advice = "check the path, or name its format with --from"


class BadImage(FormatError):
    """An image that does not decode: damaged, or an encoding mnistconv does not read."""

    advice = "check that the images are 8-bit PNG or JPEG, or download the file again"


class OverLimit(FormatError):
    """The file claims more than mnistconv holds (a count, a size): damage, mostly."""

    advice = "check that the file is not damaged, or split its data into smaller files"


class UsageError(MnistconvError):
    """Bad options or arguments, an output that exists without --force; exit code 2."""

    exit_code = 2


class NoSplits(UsageError):
    """An input with no splits to write (none, or none of those asked for)."""

    advice = "check the input, and the splits selected"


class InTheWay(UsageError):
    """Something other than the output where it goes: a file for a directory, or one."""

    advice = "move it away, or name another output"


class NoAccess(UsageError):
    """A path the system refuses to read or list (permissions, a loop of links)."""

    advice = "check the path and its permissions"


class NotFound(UsageError):
    """A path that does not exist."""

    advice = "check the path"


class BadOption(UsageError):
    """An option's value out of its range or choices (the message says which)."""

    advice = "pass a value it accepts (see the option's documentation)"
    cli_advice = "pass a value it accepts (see --help)"


class CannotWrite(UsageError):
    """Data the output format cannot hold: a label type, an image shape, a size."""

    advice = "write it to another format (formats() lists them)"
    cli_advice = "write it to another format (--to; `mnistconv formats` lists them)"


class MissingDependency(UsageError):
    """An optional dependency is needed for this format or feature."""

    def __init__(self, module, extra, feature):
        super().__init__(None, f"{feature} needs the Python package '{module}'",
                         f"install it with: pip install 'mnistconv[{extra}]'")


def optional_import(name, extra, feature, package=None):
    """The module `name`, or a MissingDependency naming the pip `package` and extra."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise MissingDependency(package or name.split(".")[0], extra, feature) from None

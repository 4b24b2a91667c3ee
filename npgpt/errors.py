"""Errors for bad input: an argument, a file or a checkpoint the user gave.

Their messages are one line that names the thing and says what is wrong. The `npgpt` command
prints them as `npgpt COMMAND: error: MESSAGE` and exits with status 2, without a traceback
(`npgpt --debug ...` or NPGPT_DEBUG=1 shows it). They subclass ValueError, so code that
catches ValueError keeps working.
"""


class InputError(ValueError):
    """Bad input from the user; the message names it and what is wrong."""


class DataError(InputError):
    """A training corpus that cannot be used: missing, a directory, binary, empty, too short."""


class CheckpointError(InputError):
    """A checkpoint that is missing, damaged, truncated, mixed from two runs or of another shape."""

"""The one exception a user can cause. Its message is a single sentence that names the file,
field or setting at fault and what to do; the CLI prints it without a traceback."""


class RecallwatchError(Exception):
    """A problem the user can fix (bad path, bad option, busy warehouse, ...)."""

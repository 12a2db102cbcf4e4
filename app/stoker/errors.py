"""The one error type every layer may raise for a problem the user can fix.

Its message is the single sentence the CLI prints (and the UI shows); no traceback.
"""


class UserError(Exception):
    """A problem the user can fix; its message is the one sentence we print."""

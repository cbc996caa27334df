"""Errors the command line reports without a traceback (kept free of engine imports)."""


class SetupError(Exception):
    """The run cannot start; the message tells the operator what to fix."""

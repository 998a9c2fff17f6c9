"""Errors a user can act on: each message names the model, the file and the way out."""


class WqkError(Exception):
    """Base class; the CLI prints these as one line and exits 1 instead of a traceback."""


class UnsupportedModelType(WqkError):
    pass


class MissingTensor(WqkError):
    pass


class CorruptCheckpoint(WqkError):
    pass


class SourceUnavailable(WqkError):
    """The hub is unreachable, a repo is gated, a package or folder is missing."""


class HeadsDoNotFit(CorruptCheckpoint, ValueError):
    """A head count of config.json does not split a q/k weight's shape. A ValueError too:
    the readers that catch one add the model and the tensor's name."""

"""The captioner's one error, apart from the modules that raise it (the model's loader and its
processor's inputs), so that neither imports the other for it."""


class CaptionerError(RuntimeError):
    """A captioner folder that cannot be loaded; the message names the folder and the reason."""

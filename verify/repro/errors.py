"""The one error every reproducer writer raises: no script can be written
for this application (the message says why)."""


class ReproError(Exception):
    pass

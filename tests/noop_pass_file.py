"""Write a pass file whose passes do nothing, for any registered pass names.

Generated from the registry, not per adapter: for each name, a subclass of
the installed class with every method the class (and its bases below
``PassBase``) defines replaced by one that does nothing, and ``apply``
returning the context untouched, registered under the same name.  Whatever
entry point an adapter calls (``new_pass(name).apply``, or a method of the
class taken from the registry, as the VPP split does), nothing is rewritten.
"""
from __future__ import annotations

TEMPLATE = '''"""Generated: {names} do nothing (tests/noop_pass_file.py)."""
from .pass_base import PassBase, register_pass


def _nothing(*args, **kwargs):
    return None


def _apply(self, main_programs, startup_programs, context=None):
    return context


def _do_nothing(name):
    installed = dict.get(PassBase._REGISTERED_PASSES, name)
    body = {{"apply": _apply, "__module__": __name__}}
    for klass in installed.__mro__:
        if klass is PassBase or not issubclass(klass, PassBase):
            break
        for attr, value in vars(klass).items():
            if attr.startswith("__") or attr in body:
                continue
            if isinstance(value, (staticmethod, classmethod)) or callable(value):
                body[attr] = _nothing
    return register_pass(name)(type("DoesNothing_" + name, (installed,), body))


for _name in {names!r}:
    _do_nothing(_name)
'''


def write(path, names) -> str:
    """Write the file for ``names`` (registered pass names) at ``path``."""
    with open(path, "w") as f:
        f.write(TEMPLATE.format(names=list(names)))
    return str(path)

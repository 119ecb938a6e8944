"""Programs from Paddle's own planner: ``python -m verify plan`` (``planner``,
one subprocess per rank: ``legacy`` Engine or PIR ``pir_rank``), and the
program-dir format they are written in (``program_format``, ``records``)."""

from pathlib import Path as _Path


def source_digest_parts() -> list:
    """The planner's own sources, in a fixed order: a cache of planned
    programs is keyed by them, so a change to any planning module replans."""
    here = _Path(__file__).resolve().parent
    # and the module that finds the loss the records name (verify/ir/loss_seed.py)
    return [f.read_bytes() for f in sorted(here.glob("*.py"))] + \
        [(here.parent / "ir" / "loss_seed.py").read_bytes()]

"""Programs from Paddle's own planner: ``python -m verify plan`` (``planner``,
one subprocess per rank: ``legacy`` Engine or PIR ``pir_rank``), and the
program-dir format they are written in (``program_format``, ``records``)."""

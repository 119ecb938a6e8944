"""Standalone reproducers: one Python file per finding that rebuilds the
application without the suite and exits 1 while the defect is there
(``reproducer`` for legacy programs, ``pir_script``, ``pir_ranks_script`` and
``micro_step_script`` for PIR)."""

"""The bottom layer: programs as plain data, and the Paddle boundary.

Snapshots of legacy and PIR programs in one SSA form (``snapshot``,
``pir_snapshot``, ``rank_snapshot``), the process set-up Paddle needs before it is
imported (``legacy_ir``), what a collective is (``collectives``), edits, renames
and dead values on snapshots, programs across a process boundary
(``program_transport``) and user pass files (``pass_files``).  Imports nothing
of the suite above it.
"""

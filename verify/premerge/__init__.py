"""``python -m verify premerge``: a Paddle checkout's change checked before it
merges (see ``run.py``).  Tools layer: drives ``python -m verify run`` and
``vocabulary`` in child processes; imports no Paddle itself."""

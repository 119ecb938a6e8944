"""``c_embedding_net.py`` (an embedding whose rows are sharded over mp, a
linear, MSE) planned with ``strategy.mp_optimization.replace_with_c_embedding``:
each rank looks its ids up in its piece of the table with
``pd_op.c_embedding`` (``start_index`` = its mp rank x rows per rank) and the
partial lookups are all-reduced over mp (``examples/c_embedding_of.py``)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from c_embedding_of import with_c_embedding  # noqa: E402

with_c_embedding("c_embedding_net.py", globals())

"""``c_embedding_net_replicated.py`` (the table replicated) planned with
``strategy.mp_optimization.replace_with_c_embedding`` on
(``examples/c_embedding_of.py``)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from c_embedding_of import with_c_embedding  # noqa: E402

with_c_embedding("c_embedding_net_replicated.py", globals())

"""``c_embedding_net.py`` with the table replicated (no ``Shard`` on its
vocab dim): the reference of ``planner_c_embedding_replicated.py``."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import c_embedding_net as _net  # noqa: E402

BATCH, VOCAB = _net.BATCH, _net.VOCAB
loss, optimizer, inputs, labels = _net.loss, _net.optimizer, _net.inputs, _net.labels


def build_model(mesh):
    return _net.VocabParallelNet(mesh, shard_vocab=False)

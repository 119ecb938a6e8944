"""A model file planned with gradient merge: another model file's names and a
``configure(strategy)`` (the planning process's strategy hook,
``verify/plan/pir_rank.py``) turning ``strategy.gradient_merge`` on.  The
gradient-merge model files of ``cases/planner_models.py`` are one call of
:func:`merged`."""
import importlib.util
import os

NAMES = ("build_model", "loss", "optimizer", "inputs", "labels")


def merged(base_file: str, namespace: dict, k_steps: int = 2, avg: bool = True,
           batch=None) -> None:
    """Fill ``namespace`` (a model file's ``globals()``) with ``base_file``'s
    model (``NAMES``, ``BATCH``: its own unless ``batch`` is given) and a
    ``configure`` setting gradient merge over ``k_steps`` micro-batches,
    the merged gradient averaged (``avg``) or summed."""
    spec = importlib.util.spec_from_file_location(
        "_merged_" + base_file.replace(".py", ""), os.path.join(os.path.dirname(__file__),
                                                                 base_file))
    base = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base)
    namespace.update({n: getattr(base, n) for n in NAMES})
    namespace["BATCH"] = batch if batch is not None else getattr(base, "BATCH", 2)

    def configure(strategy):
        strategy.gradient_merge.enable = True
        strategy.gradient_merge.k_steps = k_steps
        strategy.gradient_merge.avg = avg

    configure.__doc__ = (f"Gradient merge over {k_steps} micro-batches, the merged gradient "
                         f"{'averaged' if avg else 'summed'}.")
    namespace["configure"] = configure

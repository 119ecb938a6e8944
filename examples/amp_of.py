"""A model file planned with the PIR Engine's AMP: another model file's names
and a ``configure(strategy)`` (the planning process's strategy hook,
``verify/plan/pir_rank.py``) turning ``strategy.amp`` on, for the planner
family's AMP cases (``cases/planner_models.py``, ``passes/pir_amp.py``).

What the Engine does with it (3.3.1, ``Engine._prepare_program`` in PIR
mode): it builds the model's static program (dy2static, from dygraph mode)
inside ``paddle.amp.auto_cast(enable, custom lists, level, dtype,
use_promote)``, so the ops the AMP lists name are built behind
``pd_op.cast`` s, and it wraps the optimizer in
``paddle.static.amp.decorator.OptimizerWithMixedPrecision`` (with a
``GradScaler``, enabled for float16 only).

On a CPU build ``auto_cast`` does nothing: the build runs in dygraph mode,
whose branch of ``amp_guard`` enables AMP only on a CUDA, XPU or custom
place (``UserWarning: amp_guard can only be enabled on CUDAPlace, XPUPlace,
and CustomPlace, current place is Place(cpu), so it makes no effect.``): a
bfloat16 plan is then the float32 program, a float16 plan the float32
program with loss scaling.  To plan what a GPU user gets, ``cpu_guard=True``
(the default) rebinds ``paddle.amp.auto_cast`` in the planning process (the
only process that loads a model file) to :func:`cpu_auto_cast`, which
enters the AMP state ``amp_guard`` enters on a GPU -- the tracer's AMP
level, its white and black lists as Paddle's own ``_update_list`` makes
them, the dtype and the promote switch -- and restores it on exit.
Everything else (which ops get casts, the backward, the optimizer) is
Paddle's.
"""
import contextlib
import importlib.util
import os

NAMES = ("build_model", "loss", "optimizer", "inputs", "labels")


_ORIGINAL = []  # paddle.amp.auto_cast as installed


def cpu_auto_cast(*args, **kwargs):
    """``paddle.amp.auto_cast`` without its place test in dygraph mode (where
    the Engine enters it; module docstring); Paddle's own elsewhere (a
    model's ``auto_cast(enable=False)`` inside the static build takes the PIR
    branch, which has no place test)."""
    import paddle

    if not paddle.in_dynamic_mode():
        enable = kwargs.get("enable", args[0] if args else True)
        made = _ORIGINAL[0](*args, **kwargs)
        return made if enable else _marked_off(made)
    return _gpu_state(*args, **kwargs)


AMP_OFF = "amp_off_region"  # the bool attr (verify/value/pir_amp_rounding.py reads it)
MODEL_CAST = "model_cast"  # likewise: a cast the model's code built


def _marking_casts(fn):
    """``fn`` (``paddle.cast``, ``Value.astype``, ...) marking the
    ``pd_op.cast`` it builds in the static build with the bool attr
    ``MODEL_CAST``: a cast of the model's own (``q_embed.astype(q.dtype)``),
    told apart from those AMP's op builders insert (built in C++, unmarked)."""
    import functools

    @functools.wraps(fn)
    def marked(*args, **kwargs):
        import paddle

        out = fn(*args, **kwargs)
        if not paddle.in_dynamic_mode() and isinstance(out, paddle.pir.Value):
            op = out.get_defining_op()
            if op is not None and op.name() == "pd_op.cast":
                op.set_bool_attr(MODEL_CAST, True)
        return out

    marked._marks_casts = True
    return marked


def _mark_model_casts() -> None:
    """Mark the model's casts in the planning process (once)."""
    import paddle

    if getattr(paddle.cast, "_marks_casts", False):
        return
    paddle.cast = _marking_casts(paddle.cast)
    for name in ("astype", "cast"):
        if hasattr(paddle.pir.Value, name):
            setattr(paddle.pir.Value, name, _marking_casts(getattr(paddle.pir.Value, name)))


@contextlib.contextmanager
def _marked_off(region):
    """The model's own ``auto_cast(enable=False)`` region in the static
    build (e.g. paddleformers' LLaMA rotary embedding, "force float32"):
    every op built inside it is marked with the bool attr ``AMP_OFF``, so the
    rounding relation knows AMP's lists do not apply to it (a mark in the
    program, not a list of names)."""
    import paddle

    block = paddle.static.default_main_program().global_block()
    before = {op.id() for op in block.ops}
    with region:
        yield
    for op in block.ops:
        if op.id() not in before:
            op.set_bool_attr(AMP_OFF, True)


@contextlib.contextmanager
def _gpu_state(enable=True, custom_white_list=None, custom_black_list=None,
               level="O1", dtype="float16", use_promote=True):
    """The tracer's AMP state as ``amp_guard`` sets it on a GPU place."""
    from paddle.amp.auto_cast import AMP_LEVEL, _update_list
    from paddle.base.framework import _dygraph_tracer

    tracer = _dygraph_tracer()
    if not enable:
        with _ORIGINAL[0](enable=False):
            yield
        return
    white, black = _update_list(custom_white_list, custom_black_list, level.upper(), dtype)
    saved = (tracer._amp_level, tracer._get_amp_op_list(), tracer._amp_dtype,
             tracer._use_promote)
    tracer._amp_level = getattr(AMP_LEVEL, level.upper())
    tracer._set_amp_op_list(white, black)
    tracer._amp_dtype = dtype
    if level.upper() == "O2":
        tracer._use_promote = use_promote
    try:
        yield
    finally:
        tracer._amp_level = saved[0]
        tracer._set_amp_op_list(*saved[1])
        tracer._amp_dtype, tracer._use_promote = saved[2], saved[3]


def cpu_decorate(model, opt, dtype: str, master_weight: bool = True):
    """``paddle.amp.decorate(model, opt, level="O2", dtype, master_weight)``
    as on a GPU: on a CPU place 3.3.1's ``amp_decorate`` returns both
    unchanged (no warning); this runs the rest of it, Paddle's own
    ``amp_initialize`` (the parameters cast to ``dtype``) and
    ``_set_multi_precision`` (the optimizer keeps float32 master weights)."""
    from paddle.amp.auto_cast import _set_multi_precision, amp_initialize

    amp_initialize(models=[model], dtype=dtype, excluded_layers=None)
    _set_multi_precision(opt, master_weight)
    return model, opt


def with_amp(base_file: str, namespace: dict, dtype: str = "bfloat16", level: str = "O1",
             cpu_guard: bool = True, decorate: bool = False, black=()) -> None:
    """Fill ``namespace`` (a model file's ``globals()``) with ``base_file``'s
    model (``NAMES``, ``BATCH``) and a ``configure`` turning the Engine's AMP
    on (``dtype``, ``level``); ``cpu_guard``: plan as on a GPU (module
    docstring); ``decorate``: the O2 user's ``paddle.amp.decorate`` of the
    model and optimizer, as on a GPU (:func:`cpu_decorate`), with the loss
    taken on the output cast to float32 (3.3.1's ``MSELoss`` refuses a
    bfloat16 input); ``black``: the user's ``strategy.amp.custom_black_list``
    (ops kept in float32)."""
    spec = importlib.util.spec_from_file_location(
        "_amp_" + os.path.basename(base_file).replace(".py", ""),
        os.path.join(os.path.dirname(os.path.abspath(__file__)), base_file))
    base = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(base)
    namespace.update({n: getattr(base, n) for n in NAMES})
    for extra in ("BATCH", "VOCAB", "MESH_DIMS"):
        if hasattr(base, extra):
            namespace[extra] = getattr(base, extra)
    base_configure = getattr(base, "configure", None)

    def configure(strategy):
        if base_configure is not None:
            base_configure(strategy)
        strategy.amp.enable = True
        strategy.amp.dtype = dtype
        strategy.amp.level = level
        if black:
            strategy.amp.custom_black_list = list(black)

    configure.__doc__ = f"The Engine's AMP on: {dtype}, level {level}."
    namespace["configure"] = configure
    if decorate:
        made = []
        build, base_loss = base.build_model, base.loss

        def build_model(mesh):
            made.append(build(mesh))
            return made[-1]

        def wrap_optimizer(opt, mesh):
            return cpu_decorate(made[-1], opt, dtype)[1]

        def loss(out, label):
            import paddle

            return base_loss(paddle.cast(out, "float32"), label)

        namespace.update(build_model=build_model, wrap_optimizer=wrap_optimizer, loss=loss)
    _mark_model_casts()
    if cpu_guard:
        import paddle

        if not _ORIGINAL:
            _ORIGINAL.append(paddle.amp.auto_cast)
        paddle.amp.auto_cast = paddle.jit.not_to_static(cpu_auto_cast)

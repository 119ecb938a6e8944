"""What each value row and shape rule interprets of its op: ONE table
(``DECLARED``) that grows by a row, checked against Paddle's own op
definitions (``verify/ir/op_definitions.py``; ``tests/test_read_sets.py``).

A row that reads less of an op than Paddle's kernel does proves wrong
rewrites: change an attr the row ignores (``trans_x`` of a row that never
looks at it), connect a tensor-valued attr (``scale``'s ``ScaleTensor``,
``reshape2``'s ``ShapeTensor``) or an optimizer's skip flag, and the row
computes the old value while the kernel computes another.  So before a row
(``verify/value/symbolic.py``) or a shape rule (``verify/checks/shape_check.py``)
is applied, :func:`check` compares the op with its declaration:

  * every *connected* input slot must be declared read;
  * every attr must be declared read, or declared irrelevant with a reason
    (:data:`COMMON` for bookkeeping every op carries, ``ignore`` per op), or
    hold the default of Paddle's definition of the op (an attr the
    definition gives no default, or an op Paddle gives no definition of,
    must be declared);
  * a read attr whose declaration restricts its values (``values``: the
    row handles only some) must hold one of those.

Anything else is a refusal (:func:`refusal`: a message naming op, index,
slot or attr and value): the value proof raises ``Unsupported`` with it
(INCONCLUSIVE), the shape check lists the op as unchecked.

Declarations are per op type: ``reads`` (slots and attrs, one string),
``ignore`` (``{name: reason}``, for both tables), ``shape_ignore``
(``{name: reason}``: attrs a value row reads that do not change shapes, so a
shape rule need not read them), ``values`` (``{attr: (predicate, what)}``),
``consts`` (PIR operands the row reads only as the constant the snapshot
records beside them, ``<slot>@value``: connected to anything else they are
refused), ``refuses`` (slots and attrs the row does not model: refused when connected or
not at their default; listed so that every slot and attr of Paddle's
definition is accounted for), and ``keyed``: the row applies an uninterpreted kernel keyed by every attr
(``semantics.attrs_key``), so any attr change is another kernel and every
attr counts as read.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .op_definitions import NO_DEFAULT

# bookkeeping attrs kernels never read, each with why
COMMON = {
    "op_role": "the op's role in the schedule (forward/backward/optimize); no kernel reads it",
    "op_role_var": "names the (param, grad) pair for the optimizer passes; no kernel reads it",
    "op_namescope": "the name scope the op was built in (debug info)",
    "op_callstack": "the Python stack that built the op (debug info)",
    "model_cast": "the suite's plan-time mark of a cast the model's own code built "
                  "(examples/amp_of.py); no kernel reads it",
    "amp_off_region": "the suite's plan-time mark of an op the model built inside its own "
                      "auto_cast(enable=False) (examples/amp_of.py); no kernel reads it",
    "op_device": "a pipeline placement hint: which device runs the op, not what it computes",
    "with_quant_attr": "marks quantization attrs for the quantization passes",
    "use_mkldnn": "selects the oneDNN kernel of the same function",
    "use_onednn": "selects the oneDNN kernel of the same function",
    "mkldnn_data_type": "the oneDNN kernel's compute type (oneDNN kernels only)",
    "onednn_data_type": "the oneDNN kernel's compute type (oneDNN kernels only)",
    "use_quantizer": "oneDNN int8 quantization switch (oneDNN kernels only)",
    "use_cudnn": "selects the cuDNN kernel of the same function",
    "Scale_x": "oneDNN int8 input scale (oneDNN kernels only)",
    "Scale_y": "oneDNN int8 input scale (oneDNN kernels only)",
    "Scale_out": "oneDNN int8 output scale (oneDNN kernels only)",
    "force_fp32_output": "oneDNN int8 output switch (oneDNN kernels only)",
    # PIR
    "chunk_id": "the pipeline chunk the op is scheduled in (scheduling)",
    "dist_attr": "placements the distributed checks read; the local kernel computes on "
                 "the local tensors it is given",
    "stop_gradient": "autograd bookkeeping: whether backward flows through the results",
    "persistable": "whether the results outlive a step (scope bookkeeping)",
    "execution_stream": "the stream the op runs on (the stream checks read it)",
    "force_record_event": "a multi-stream event switch (the stream checks read it)",
    "event_to_record": "a multi-stream event name (the stream checks read it)",
    "events_to_wait": "multi-stream event names (the stream checks read them)",
    "kernel_name": "the lowered kernel's name (what the op type already says)",
    "struct_name": "the Python layer that built the op (debug info)",
    "replace_all_uses_with_reshard_var": "a marker the reshard pass reads (its uses move to "
                                         "the resharded value); no kernel reads it",
    "scheduling_priority": "the pipeline scheduler's ordering hint (when, not what)",
    "fwd_recompute_id": "marks a forward op of a recompute() segment for the recompute "
                        "pass (which ops to clone); no kernel reads it",
    "bwd_recompute_id": "marks the recompute pass's clone of a forward op (its segment); "
                        "no kernel reads it",
}

KEYED = "the kernel is uninterpreted and keyed by every attr (semantics.attrs_key)"


@dataclass(frozen=True)
class Decl:
    reads: frozenset
    ignore: dict = field(default_factory=dict)
    shape_ignore: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    keyed: bool = False
    refuses: frozenset = frozenset()
    consts: frozenset = frozenset()


def _d(reads="", ignore=None, shape_ignore=None, values=None, keyed=False,
       refuses="", consts="") -> Decl:
    return Decl(frozenset(reads.split()) | frozenset(consts.split()), dict(ignore or {}),
                dict(shape_ignore or {}), dict(values or {}), keyed,
                frozenset(refuses.split()), frozenset(consts.split()))


def _is(*allowed):
    return (lambda v: v in allowed), " or ".join(repr(a) for a in allowed)


_FALSE = _is(False, 0, None)
_AXIS_LAST = _is(-1)
_PLACE = "the device the constant is made on; the value is the same on any device"
_VALUE_ONLY = "a value the row reads; shapes do not depend on it"
_LAYOUT = "a oneDNN layout hint; the CPU/GPU kernels ignore it"
_IS_TEST = "an inference switch; layer_norm's outputs are the same under it"
_DROPOUT = "a random mask's parameters: shapes do not depend on them"
_INIT = "the distribution drawn from: shapes do not depend on it"
_PARAM_META = "parameter metadata the passes read; the op binds the parameter's value " \
              "(a leaf of the proof) whatever it says"
_IDENTITY = "c_identity's forward is the identity on any ring and stream"
_INFER = "read by shape inference of unknown (-1) dims only; the kernel slices by starts/ends"
_UNDEFINED = (lambda v: v in (None, "") or "UNDEFINED" in str(v).upper(), "no dtype (UNDEFINED)")
_OPT = "the optimizer's hyper-parameter: shapes do not depend on it"

# elementwise binary ops: the row broadcasts by ``axis`` (Paddle's rule)
_EW = _d("X Y axis", ignore={"x_data_format": _LAYOUT, "y_data_format": _LAYOUT})
_EW_GRAD = _d("X Y Out@GRAD axis")
_ADAM = _d("Param Grad Moment1 Moment2 LearningRate Beta1Pow Beta2Pow MasterParam "
           "multi_precision beta1 beta2", keyed=True,
           refuses="Moment2Max SkipUpdate Beta1Tensor Beta2Tensor EpsilonTensor")
_PIR_ADAM = _d("param grad moment1 moment2 learning_rate beta1_pow beta2_pow master_param "
               "multi_precision", consts="beta1 beta2 epsilon", keyed=True,
               refuses="moment2_max skip_update")
_COLLECTIVE = _d("X x ring_id nranks root root_id reduce_type use_calc_stream "
                 "use_model_parallel")

DECLARED = {
    # -- index maps ------------------------------------------------------------
    "reshape2": _d("X shape", refuses="Shape ShapeTensor"),
    "reshape": _d("X shape", refuses="Shape ShapeTensor"),
    "reshape2_grad": _d("Out@GRAD XShape", ignore={
        "shape": "the grad reshapes back to XShape's dims, whatever the forward's target"}),
    "transpose2": _d("X axis", ignore={"data_format": _LAYOUT}),
    "transpose": _d("X axis", ignore={"data_format": _LAYOUT}),
    "transpose2_grad": _d("Out@GRAD XShape axis", ignore={"data_format": _LAYOUT}),
    "stack": _d("X axis"),
    "split": _d("X axis num sections", refuses="AxisTensor SectionsTensorList"),
    "cast": _d("X in_dtype out_dtype"),
    "assign": _d("X"),
    "c_identity": _d("X", ignore={"ring_id": _IDENTITY, "use_calc_stream": _IDENTITY,
                                  "use_model_parallel": _IDENTITY}),
    "fill_constant": _d("ValueTensor shape dtype value str_value",
                        refuses="ShapeTensor ShapeTensorList",
                        ignore={"force_cpu": _PLACE, "place_type": _PLACE}),
    "nop": _d("X"),
    "depend": _d("X", ignore={"Dep": "a control dependence: orders the op after Dep; "
                                     "its value is X's"}),
    "slice": _d("Input axes starts ends decrease_axis", ignore={"infer_flags": _INFER},
                refuses="StartsTensor EndsTensor StartsTensorList EndsTensorList"),
    "slice_grad": _d("Input Out@GRAD axes starts ends decrease_axis",
                     ignore={"infer_flags": _INFER},
                     refuses="StartsTensor EndsTensor StartsTensorList EndsTensorList"),
    "lookup_table_v2": _d("Ids W padding_idx",
                          values={"is_distributed": _FALSE, "remote_prefetch": _FALSE},
                          refuses="table_names epmap height_sections trainer_id slot",
                          ignore={"is_sparse": "the forward values do not depend on it "
                                               "(only the grad's form does)"}),
    "lookup_table_v2_grad": _d("Ids W Out@GRAD padding_idx is_sparse"),
    # -- arithmetic ------------------------------------------------------------
    "scale": _d("X scale bias bias_after_scale", refuses="ScaleTensor BiasTensor"),
    "sum": _d("X"),
    "elementwise_add": _EW,
    "elementwise_sub": _EW,
    "elementwise_mul": _EW,
    "elementwise_div": _EW,
    "elementwise_max": _EW,
    "elementwise_min": _EW,
    "elementwise_pow": _EW,
    "elementwise_add_grad": _EW_GRAD,
    "elementwise_sub_grad": _EW_GRAD,
    "elementwise_mul_grad": _EW_GRAD,
    "elementwise_div_grad": _d("X Y Out Out@GRAD axis"),
    "elementwise_max_grad": _EW_GRAD,
    "elementwise_min_grad": _EW_GRAD,
    "reduce_mean": _d("X dim keep_dim reduce_all in_dtype out_dtype",
                      values={"in_dtype": _is(-1), "out_dtype": _is(-1)}),
    "reduce_sum": _d("X dim keep_dim reduce_all in_dtype out_dtype",
                     values={"in_dtype": _is(-1), "out_dtype": _is(-1)}),
    "reduce_mean_grad": _d("X Out@GRAD dim keep_dim reduce_all in_dtype out_dtype",
                           values={"in_dtype": _is(-1), "out_dtype": _is(-1)}),
    "reduce_sum_grad": _d("X Out@GRAD dim keep_dim reduce_all in_dtype out_dtype",
                          values={"in_dtype": _is(-1), "out_dtype": _is(-1)}),
    "mean": _d("X"),
    "mean_grad": _d("X Out@GRAD"),
    "sgd": _d("Param Grad LearningRate MasterParam multi_precision"),
    "matmul_v2": _d("X Y trans_x trans_y"),
    "matmul": _d("X Y transpose_X transpose_Y alpha",
                 values={"head_number": _is(1)}),
    "matmul_v2_grad": _d("X Y Out@GRAD trans_x trans_y"),
    "square": _d("X"),
    "square_grad": _d("X Out@GRAD"),
    "squared_l2_norm": _d("X"),
    "gelu": _d("X approximate", keyed=True),
    "gelu_grad": _d("X Out@GRAD approximate", keyed=True),
    "relu": _d("X", keyed=True),
    "relu_grad": _d("Out Out@GRAD", keyed=True),
    "sqrt": _d("X", keyed=True),
    "sqrt_grad": _d("Out Out@GRAD"),
    "exp": _d("X"),
    "exp_grad": _d("Out Out@GRAD"),
    "tanh": _d("X"),
    "tanh_grad": _d("Out Out@GRAD"),
    "sigmoid": _d("X"),
    "sigmoid_grad": _d("Out Out@GRAD"),
    "adamw": _ADAM,
    "adam": _ADAM,
    "layer_norm": _d("X Scale Bias epsilon begin_norm_axis", keyed=True,
                     ignore={"is_test": _IS_TEST}),
    "layer_norm_grad": _d("X Scale Bias Mean Variance Y@GRAD epsilon begin_norm_axis",
                          keyed=True),
    "softmax": _d("X axis", keyed=True, ignore={"data_format": _LAYOUT,
                                                "is_test": "inference switch of oneDNN"}),
    "softmax_grad": _d("Out Out@GRAD axis", ignore={"data_format": _LAYOUT}),
    # -- shape rules only --------------------------------------------------------
    "c_allreduce_sum": _COLLECTIVE,
    "c_broadcast": _COLLECTIVE,
    "mp_allreduce_sum": _COLLECTIVE,
    "all_gather": _COLLECTIVE,
    "all_reduce": _COLLECTIVE,
    "broadcast": _COLLECTIVE,
    "reduce": _COLLECTIVE,
    "reduce_scatter": _COLLECTIVE,
    "check_finite_and_unscale": _d("X Scale"),
    # the value row reads the bounds as attrs only: tensor bounds are refused
    "clip": _d("X min max", refuses="Min Max", shape_ignore={"Min": _VALUE_ONLY,
                                                              "Max": _VALUE_ONLY}),
    "clip_by_norm": _d("X", shape_ignore={"max_norm": _VALUE_ONLY}),
    "coalesce_tensor": _d("Input dtype copy_data set_constant persist_output constant "
                          "use_align align_size user_defined_size_of_dtype concated_shapes "
                          "concated_ranks"),
    # the value rows (seed, dropout, dropout_grad) read the seed and the mask's
    # parameters; the shape rules read none of them (same shape as X / Out@GRAD)
    "dropout": _d("X Seed dropout_prob is_test dropout_implementation seed fix_seed"),
    "dropout_grad": _d("Out@GRAD Mask dropout_prob is_test dropout_implementation",
                       ignore={"seed": "the forward's seed: the grad reads the mask it drew",
                               "fix_seed": "the forward's seed: the grad reads the mask it "
                                           "drew"}),
    "gaussian_random": _d("shape dtype", refuses="ShapeTensor ShapeTensorList", shape_ignore={
        "mean": _INIT, "std": _INIT, "seed": _INIT}),
    "uniform_random": _d("shape dtype", refuses="ShapeTensor ShapeTensorList", shape_ignore={
        "min": _INIT, "max": _INIT, "seed": _INIT, "diag_num": _INIT, "diag_step": _INIT,
        "diag_val": _INIT}),
    "memcpy": _d("X dst_place_type"),
    "momentum": _d("Param Grad Velocity LearningRate MasterParam", shape_ignore={
        "mu": _OPT, "use_nesterov": _OPT, "regularization_method": _OPT,
        "regularization_coeff": _OPT, "multi_precision": _OPT, "rescale_grad": _OPT}),
    "share_data": _d("X"),
    "seed": _d("seed", ignore={
        "deterministic": "how a seed 0 is drawn (the row refuses seed 0)",
        "rng_name": "which generator draws a seed 0 (the row refuses seed 0)",
        "force_cpu": _PLACE}),
    "softmax_with_cross_entropy": _d("Logits Label soft_label axis", shape_ignore={
        "use_softmax": _VALUE_ONLY, "numeric_stable_mode": _VALUE_ONLY,
        "ignore_index": _VALUE_ONLY}),
    "update_loss_scaling": _d("X FoundInfinite PrevLossScaling InGoodSteps InBadSteps "
                              "StopUpdate", shape_ignore={
                                  "incr_every_n_steps": _OPT, "decr_every_n_nan_or_inf": _OPT,
                                  "incr_ratio": _OPT, "decr_ratio": _OPT,
                                  "stop_update": _OPT}),
    # -- PIR ---------------------------------------------------------------------
    "builtin.parameter": _d("parameter_name", ignore={
        "is_distributed": _PARAM_META, "is_parameter": _PARAM_META, "need_clip": _PARAM_META,
        "trainable": _PARAM_META}),
    "pd_op.data": _d("name shape dtype", ignore={"place": _PLACE}),
    "builtin.set_parameter": _d("operands parameter_name"),
    "builtin.shadow_output": _d("operands output_name"),
    "builtin.combine": _d("operands"),
    # its dist_attr names the placements it reshards from and to: on local
    # shapes they decide whether the rule can derive the result's shape
    "dist_op.reshard": _d("operands dist_attr"),
    "builtin.slice": _d("operands index"),
    "builtin.split": _d("operands results@index"),
    "pd_op.full": _d("shape value dtype", ignore={"place": _PLACE}),
    "pd_op.full_int_array": _d("value dtype", ignore={"place": _PLACE}),
    "pd_op.full_like": _d("x dtype", consts="value", ignore={"place": _PLACE}),
    "pd_op.matmul": _d("x y transpose_x transpose_y"),
    "pd_op.matmul_grad": _d("x y out_grad transpose_x transpose_y"),
    "pd_op.reshape": _d("x", consts="shape"),
    "pd_op.reshape_grad": _d("xshape x out_grad"),
    "pd_op.transpose": _d("x perm"),
    "pd_op.transpose_grad": _d("out_grad perm"),
    "pd_op.square": _d("x"),
    "pd_op.square_grad": _d("x out_grad"),
    "pd_op.scale": _d("x bias bias_after_scale", consts="scale"),
    "pd_op.scale_": _d("x bias bias_after_scale", consts="scale"),
    "pd_op.mean": _d("x keepdim", consts="axis"),
    "pd_op.mean_grad": _d("x out_grad keepdim", consts="axis",
                          values={"reduce_all": _FALSE}),
    "pd_op.sum": _d("x keepdim", consts="axis", values={"dtype": _UNDEFINED}),
    "pd_op.sum_grad": _d("x out_grad keepdim", consts="axis", values={"reduce_all": _FALSE}),
    "pd_op.sgd_": _d("param grad learning_rate master_param multi_precision"),
    "pd_op.momentum_": _d("param grad velocity learning_rate mu use_nesterov "
                          "regularization_method regularization_coeff rescale_grad "
                          "multi_precision master_param",
                          values={"use_nesterov": _FALSE,
                                  "regularization_method": _is("", None),
                                  "rescale_grad": _is(1.0, 1)}),
    "pd_op.adam_": _PIR_ADAM,
    "pd_op.adamw_": _PIR_ADAM,
    "pd_op.assign": _d("x"),
    # the model-parallel identity paddleformers' parallel_matmul inserts when
    # fleet's hybrid group is initialised (the shape rule: same as x)
    "pd_op.c_identity": _d("x", ignore={"ring_id": _IDENTITY, "use_calc_stream": _IDENTITY,
                                        "use_model_parallel": _IDENTITY}),
    "pd_op.assign_out_": _d("x output"),
    "pd_op.share_data_": _d("x"),
    "pd_op.cast": _d("x dtype"),
    "pd_op.split_with_num": _d("x num", consts="axis"),
    "pd_op.split": _d("x", consts="sections axis"),
    "pd_op.add": _d("x y axis"),  # the legacy row reads an axis if one is set
    "pd_op.add_": _d("x y axis", ignore={
        "grad_merge_add": "marks the gradient-merge accumulation for the passes; the kernel "
                          "adds"}),
    "pd_op.add_grad": _d("x y out_grad axis"),
    "pd_op.add_n": _d("inputs"),
    "pd_op.subtract": _d("x y axis"),
    "pd_op.subtract_grad": _d("x y out_grad axis"),
    "pd_op.multiply": _d("x y axis"),
    "pd_op.multiply_grad": _d("x y out_grad axis"),
    "pd_op.divide": _d("x y axis"),
    "pd_op.divide_grad": _d("x y out out_grad", values={"axis": _AXIS_LAST}),
    "pd_op.pow": _d("x y"),
    "pd_op.pow_grad": _d("x out_grad y"),
    "pd_op.rsqrt": _d("x", keyed=True),
    "pd_op.squared_l2_norm": _d("x"),
    "pd_op.stack": _d("x axis"),
    "pd_op.sqrt": _d("x", keyed=True),
    "pd_op.maximum": _d("x y"),
    "pd_op.minimum": _d("x y"),
    "pd_op.rsqrt_grad": _d("out out_grad"),
    "pd_op.tanh": _d("x", keyed=True),
    "pd_op.tanh_grad": _d("out out_grad"),
    "pd_op.cos": _d("x", keyed=True),
    "pd_op.sin": _d("x", keyed=True),
    "pd_op.silu": _d("x", keyed=True),
    "pd_op.silu_grad": _d("x out_grad", keyed=True, ignore={
        "out": "silu(x): a function of x, which the row reads"}),
    "pd_op.gelu": _d("x approximate", keyed=True),
    # no attrs: silu is one function (semantics._SILU_KEY); y absent: x's halves
    "pd_op.swiglu": _d("x y"),
    "pd_op.swiglu_grad": _d("x y out_grad"),
    "pd_op.gelu_grad": _d("x out_grad approximate", keyed=True),
    "pd_op.relu": _d("x", keyed=True),
    "pd_op.relu_grad": _d("out out_grad", keyed=True),
    "pd_op.not_equal": _d("x y", keyed=True),
    "pd_op.bitwise_and": _d("x y", keyed=True),
    "pd_op.where": _d("condition x y", keyed=True),
    "pd_op.softmax": _d("x axis", keyed=True),
    "pd_op.softmax_grad": _d("out out_grad axis"),
    "pd_op.embedding": _d("x weight padding_idx", ignore={
        "sparse": "the forward values do not depend on it (only the grad's form does)"}),
    "pd_op.embedding_grad": _d("x weight out_grad padding_idx", values={"sparse": _FALSE}),
    # vocab_size keys the forward's selection atoms (the table the ids index: the
    # serial lookup's); the CPU kernel itself does not read it
    "pd_op.c_embedding": _d("weight x start_index vocab_size"),
    "pd_op.c_embedding_grad": _d("weight x out_grad start_index"),
    "pd_op.layer_norm": _d("x scale bias epsilon begin_norm_axis"),
    "pd_op.layer_norm_grad": _d("x scale bias mean variance out_grad epsilon begin_norm_axis"),
    "pd_op.unsqueeze": _d("x", consts="axis"),
    "pd_op.expand": _d("x", consts="shape"),
    "pd_op.tile": _d("x", consts="repeat_times"),
    "pd_op.concat": _d("x", consts="axis"),
    "pd_op.concat_grad": _d("x out_grad", consts="axis"),
    "pd_op.slice": _d("input axes decrease_axis", consts="starts ends",
                      ignore={"infer_flags": _INFER}),
    "pd_op.slice_grad": _d("input out_grad axes decrease_axis", consts="starts ends",
                           ignore={"infer_flags": _INFER}),
    "pd_op.set_value_": _d("x axes decrease_axes none_axes shape dtype values",
                           consts="starts ends steps", keyed=True),
    "pd_op.set_value_with_tensor_": _d("x values axes decrease_axes none_axes",
                                       consts="starts ends steps"),
    "pd_op.assign_value_": _d("output shape dtype values", ignore={"place": _PLACE}),
    "pd_op.arange": _d("dtype", consts="start end step",
                       ignore={"place": _PLACE}),
    "pd_op.empty": _d("dtype", consts="shape", ignore={"place": _PLACE}),
    "pd_op.tril": _d("x diagonal", keyed=True),
    "pd_op.cross_entropy_with_softmax": _d("input label soft_label use_softmax "
                                           "numeric_stable_mode ignore_index axis", keyed=True),
    "pd_op.cross_entropy_with_softmax_grad": _d("label softmax loss_grad soft_label "
                                                "use_softmax numeric_stable_mode "
                                                "ignore_index axis", keyed=True),
    "pd_op.all_gather": _COLLECTIVE,
    "pd_op.all_reduce": _COLLECTIVE,
    "pd_op.all_reduce_": _COLLECTIVE,
    "pd_op.broadcast": _COLLECTIVE,
    "pd_op.all_to_all": _COLLECTIVE,
    "pd_op.reduce_scatter": _COLLECTIVE,
    "pd_op.send_v2": _d("x ring_id peer use_calc_stream dynamic_shape"),
    "pd_op.recv_v2": _d("ring_id peer out_shape dtype use_calc_stream dynamic_shape"),
    # the GLM-style rotary of ERNIE 4.5: index maps (value rows and shape rules)
    "pd_op.repeat_interleave": _d("x repeats axis output_size"),
    "pd_op.strided_slice": _d("x axes", consts="starts ends strides"),
    "pd_op.strided_slice_grad": _d("x out_grad axes", consts="starts ends strides"),
    "pd_op.flatten": _d("x start_axis stop_axis"),
    "pd_op.flatten_grad": _d("x out_grad"),
    "pd_op.stack_grad": _d("x out_grad axis"),
    "pd_op.uniform": _d("dtype", consts="shape", ignore={"place": _PLACE},
                        shape_ignore={"min": _INIT, "max": _INIT, "seed": _INIT,
                                      "min@value": _INIT, "max@value": _INIT}),
}


def _same(a, b) -> bool:
    """A snapshot value equals a definition's default (ints, floats and
    bools compare by value; a float32 default against the float64 a
    snapshot holds within float32 rounding)."""
    if a is NO_DEFAULT or b is NO_DEFAULT:
        return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        try:
            x, y = float(a), float(b)
        except (TypeError, ValueError):
            return False
        return x == y or abs(x - y) <= 1e-7 * max(abs(x), abs(y))
    return a == b


def undeclared(op, definition=None, shape: bool = False) -> list:
    """``[(what, name, value)]``: each connected input slot and each attr of
    ``op`` its declaration leaves unaccounted for (``what`` is ``"slot"``,
    ``"attr"`` or ``"value"`` for a read attr outside its declared values);
    ``[("op", type, None)]`` when the type has no declaration.  ``definition``
    (an :class:`~verify.ir.op_definitions.OpDef` or None) gives the defaults
    an undeclared attr may hold; ``shape``: for a shape rule."""
    decl = DECLARED.get(op.type)
    if decl is None:
        return [("op", op.type, None)]
    out = []
    accounted = decl.reads | set(decl.ignore)
    if shape:
        accounted |= set(decl.shape_ignore)
    for slot, names in op.inputs.items():
        if any(names) and slot not in accounted:
            out.append(("slot", slot, list(names)))
        elif any(names) and slot in decl.consts and f"{slot}@value" not in op.attrs:
            out.append(("const", slot, list(names)))
    defaults = definition.attrs if definition is not None else {}
    for name, value in op.attrs.items():
        if name in COMMON:
            continue
        if name in decl.values:
            ok, _ = decl.values[name]
            if not ok(value):
                out.append(("value", name, value))
            continue
        if name in accounted or decl.keyed:
            continue
        if name.endswith("@value") and name[:-len("@value")] in accounted:
            continue  # the constant of an operand its row reads (pir_snapshot records it)
        if not _same(value, defaults.get(name, NO_DEFAULT)):
            out.append(("attr", name, value))
    return out


def refusal(op, definition=None, shape: bool = False) -> str | None:
    """None when ``op`` is fully accounted for; else a message naming the
    first of :func:`undeclared` (op type, index, slot or attr, value)."""
    bad = undeclared(op, definition, shape)
    if not bad:
        return None
    what, name, value = bad[0]
    at = f"op {op.idx} ({op.type})"
    if what == "op":
        return f"{at}: no read-set declaration for op type {op.type}"
    if what == "slot":
        return (f"{at}: input slot {name} is connected ({', '.join(value)}) but its "
                f"{'rule' if shape else 'row'} does not read it")
    if what == "const":
        return (f"{at}: input slot {name} is connected to {', '.join(value)}, not a "
                f"constant: its {'rule' if shape else 'row'} reads only a constant there")
    if what == "value":
        _, allowed = DECLARED[op.type].values[name]
        return f"{at}: attr {name}={value!r}: its {'rule' if shape else 'row'} handles " \
               f"only {allowed}"
    return (f"{at}: attr {name}={value!r} differs from Paddle's default and its "
            f"{'rule' if shape else 'row'} does not declare it")

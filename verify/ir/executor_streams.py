"""The stream and the manual events PIR's executor runs an op with, read
from where Paddle 3.3.1's ``PirInterpreter`` reads them.

What an attr says is not what runs: the executor reads the stream attrs of
some ops only, under some names and values only.  The rules below are the
executor's (sources of 3.3.1, ``paddle/fluid/framework/new_executor/``):

* **Which ops read them.**  ``StandaloneExecutor`` lowers each job program
  with ``PdOpLowerToKernelPass``, which copies a ``pd_op`` op's whole
  attribute map onto its ``pd_kernel`` op.  ``PirInterpreter::
  BuildInstruction`` makes a ``PhiKernelInstruction`` or a
  ``LegacyKernelInstruction`` of each such op, and their constructors read
  the attrs (``op_attributes.count("execution_stream")``,
  ``"force_record_event"``, ``"event_to_record"``, ``"events_to_wait"``).
  Ops of another dialect (a custom op's ``custom_kernel``) are not modelled
  here: read as on the default stream.
  Not read: ``builtin.*`` and ``cf.*`` ops (a ``builtin.combine`` instruction
  or no instruction at all), the ops ``GetSpecialOpNames`` skips
  (``pd_op.data``, ``pd_op.feed``, ``builtin.shadow_output``, ...), and the
  ``pd_op`` ops that keep their dialect and get an instruction of their own
  (``pd_op.if``, ``pd_op.while``, ``pd_op.pylayer``, ``pd_op.has_elements``,
  ``pd_op.assert``, ``pd_op.select_input``, ``pd_op.select_output``): those
  run on the default stream whatever their attrs say.  A PIR op's
  ``dist_attr`` has no stream (3.3.1's ``OperationDistAttribute`` carries a
  mesh, placements and ``chunk_id``; ``chunk_id`` picks a VPP chunk's job
  program, not a stream).
* **Which value is the default stream.**  ``ParseDeviceContext``
  (``instruction/instruction_util.cc``) gives an op its own device context
  ``"CustomStream-" + name`` whenever ``execution_stream != kDefaultStream``,
  and ``kDefaultStream`` is ``"DefaultStream"`` (installed header
  ``include/paddle/fluid/framework/new_executor/instruction/instruction_defs.h``).
  So ``execution_stream="DefaultStream"`` (what the reshard functions set)
  is the default stream, and ``execution_stream="default"`` (the legacy
  dist attr's spelling of it) is a stream of its own.
* **Manual events.**  An op that runs as a kernel with
  ``force_record_event`` true records, after it runs, an event under its
  ``event_to_record`` name (``"default"`` when unset); an op listing a name
  in ``events_to_wait`` waits, before it runs, for the event last recorded
  under that name (``PirStreamAnalyzer`` shares one name -> event map across
  the cores of a plan's jobs).

Labels: the default stream is ``"default"`` (as in every snapshot); a
custom stream is its ``execution_stream`` name, except the names that would
read as the default (``"default"``, ``""``), which keep the executor's own
context name ``"CustomStream-<name>"``.
"""
from __future__ import annotations

DEFAULT_STREAM_VALUE = "DefaultStream"  # kDefaultStream
CUSTOM_STREAM_PREFIX = "CustomStream-"  # kCustomStream + "-"
# GetSpecialOpNames (interpreter/interpreter_util.cc): no instruction is built
SKIPPED_OPS = frozenset({"builtin.combine", "builtin.slice", "pd_op.feed",
                         "builtin.set_parameter", "builtin.parameter", "builtin.constant",
                         "pd_op.data", "builtin.shadow_output"})
# pd_op ops BuildInstruction keeps in their dialect (instructions of their own)
OWN_INSTRUCTION_OPS = frozenset({"pd_op.if", "pd_op.while", "pd_op.pylayer",
                                 "pd_op.has_elements", "pd_op.assert",
                                 "pd_op.select_input", "pd_op.select_output",
                                 "pd_op.tensorrt_engine"})


def runs_as_kernel(op_type: str) -> bool:
    """Whether PIR's executor runs ``op_type`` as a phi/legacy kernel
    instruction, the only instructions that read the stream attrs."""
    return op_type.startswith("pd_op.") and op_type not in SKIPPED_OPS and \
        op_type not in OWN_INSTRUCTION_OPS


# the builtin / cf ops BuildInstruction makes an instruction of (the others
# only name or split variables: no instruction, nothing launched)
RUNNING_BUILTINS = frozenset({"builtin.combine", "cf.tuple_push", "cf.tuple_pop", "cf.yield"})


def runs_at_all(op_type: str) -> bool:
    """Whether an instruction is built for ``op_type`` (on the default stream
    unless :func:`runs_as_kernel`)."""
    if op_type.startswith(("builtin.", "cf.")):
        return op_type in RUNNING_BUILTINS
    return op_type not in SKIPPED_OPS


def executed_stream(op_type: str, attrs: dict) -> str:
    """The stream the executor runs a PIR op on (label: module docstring)."""
    if not runs_as_kernel(op_type):
        return "default"
    s = attrs.get("execution_stream")
    if not isinstance(s, str) or s == DEFAULT_STREAM_VALUE:
        return "default"
    return CUSTOM_STREAM_PREFIX + s if s in ("default", "") else s


def recorded_event(op_type: str, attrs: dict) -> str | None:
    """The event name a PIR op records after it runs, None when it records
    none the executor reads."""
    if not runs_as_kernel(op_type) or attrs.get("force_record_event") is not True:
        return None
    name = attrs.get("event_to_record", "default")
    return name if isinstance(name, str) else None


def awaited_events(op_type: str, attrs: dict) -> list:
    """The event names a PIR op waits for before it runs (as read)."""
    if not runs_as_kernel(op_type):
        return []
    names = attrs.get("events_to_wait")
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def executed_streams(snap):
    """``snap`` with each op's ``stream`` the one the executor runs it on: a
    PIR snapshot's ops re-read from their attrs (the snapshot's ``stream``
    field repeats the attr as written); a legacy snapshot as it is (its
    stream is already the desc's dist attr the executor reads:
    ``verify/plan/records.py``)."""
    if (snap.meta or {}).get("ir") != "pir":
        return snap
    from dataclasses import replace

    ops = [o if o.stream == (s := executed_stream(o.type, o.attrs)) else replace(o, stream=s)
           for o in snap.ops]
    if all(a is b for a, b in zip(ops, snap.ops)):
        return snap
    out = replace(snap, ops=ops)
    return out

"""Read-sets (``verify/ir/read_sets.py``) against Paddle's own op
definitions, and what they refuse: a rewrite that changes an attr a row
does not read, or connects a tensor-valued attr input, is not proved."""
from __future__ import annotations

import pytest

from verify.checks.shape_rules import RULES
from verify.ir import op_definitions, read_sets
from verify.value.semantics import ROWS


def _unaccounted(op_type):
    """Slots and attrs of Paddle's definition of ``op_type`` its declaration
    neither reads, declares irrelevant nor refuses."""
    decl = read_sets.DECLARED[op_type]
    d = op_definitions.definition(op_type)
    if d is None:
        return []
    known = decl.reads | set(decl.ignore) | set(decl.shape_ignore) | set(decl.values) | \
        decl.refuses | set(read_sets.COMMON)
    names = list(d.inputs) + ([] if decl.keyed else list(d.attrs))
    return [n for n in names if n not in known]


def test_every_row_and_rule_has_a_declaration():
    missing = sorted(t for t in set(ROWS) | set(RULES) if t not in read_sets.DECLARED)
    assert not missing, f"no read-set declaration for {missing}"


def test_every_slot_and_attr_of_paddles_definitions_is_accounted_for():
    bad = {t: _unaccounted(t) for t in sorted(set(ROWS) | set(RULES))}
    bad = {t: v for t, v in bad.items() if v}
    assert not bad, "declarations leave Paddle's slots/attrs unaccounted for: " + \
        "; ".join(f"{t}: {' '.join(v)}" for t, v in bad.items())

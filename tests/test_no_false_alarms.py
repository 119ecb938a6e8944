"""A checker that cries wolf is ignored: an identity rewrite and a consistent
rename must be EQUIVALENT on every case and rank, and reruns must agree."""
import pytest

import cases
import passes
from passes.base import PassRun
from verify.engine.application import RankOutcome, run_application
from verify.checks import CheckContext, run_static_checks
from verify.engine.matrix_runner import pick_backend
from verify.numeric.equivalence import numeric_checks
from verify.ir.snapshot import from_programs
from verify.verdicts import Verdict

# legacy programs (the PIR identity rewrite: tests/test_pir_snapshot.py)
ALL = sorted(n for n, c in cases.all_cases().items() if c.ir == "legacy")


def _stratum(name):
    """What makes a case's programs differ for the checks: its family (how it
    is built: by hand, Paddle's Engine, the planner), AMP (a float32 numeric
    twin), symbolic dims, world size, AMP level, sequence parallelism."""
    c = cases.all_cases()[name]
    return (c.family, bool(c.params.get("amp_dtype")), bool(c.symbols), c.world_size,
            str(c.amp_level), bool(c.enable_sp))


def _no_faithful_application(name):
    """True when no application on the case is EQUIVALENT in the baseline:
    the gate then never shows the checks passing a faithful program of it."""
    from verify.engine import baseline

    return all(e["verdict"] != "EQUIVALENT" for k, e in baseline.load()["entries"].items()
               if k.split("::")[1] == name)


def _sample(pick):
    """A deterministic stratified sample of ALL: one case per stratum
    (``pick`` chooses among its members), plus every case no faithful gate
    application covers.  Every other case's checks are shown passing a
    faithful rewrite of it by the gate (an EQUIVALENT baseline entry)."""
    strata = {}
    for name in ALL:
        strata.setdefault(_stratum(name), []).append(name)
    chosen = {pick(members) for members in strata.values()}
    return sorted(chosen | {n for n in ALL if _no_faithful_application(n)})


# identity: the first member by name (stack_1_layer before stack_4_layers: the
# layer stacks repeat one block, the gate runs every size); rename: the second
# where a stratum has several, so the two tests meet different cases
IDENTITY_SAMPLE = _sample(lambda members: sorted(members)[0])
RENAME_SAMPLE = _sample(lambda members: sorted(members)[min(1, len(members) - 1)])


def _sampled(names):
    """ALL as parameters; under the default ``--sweep sample`` those not in
    ``names`` are skipped saying why (``--sweep all``: every case)."""
    def params(config_all):
        return [pytest.param(n, marks=() if config_all or n in names else pytest.mark.skip(
            reason="sampled out: the default run covers every stratum of the cases "
                   "(family, AMP, symbolic dims, world size, AMP level, SP) and every case "
                   "without a faithful gate application "
                   "(test_the_samples_cover_every_stratum); `--sweep all` runs every case"))
            for n in ALL]
    return params


def pytest_generate_tests(metafunc):
    every = metafunc.config.getoption("sweep", default="sample") == "all"
    if metafunc.function.__name__ == "test_identity_rewrite_is_equivalent":
        metafunc.parametrize("case_name", _sampled(IDENTITY_SAMPLE)(every))
    elif metafunc.function.__name__ == "test_consistent_rename_is_equivalent":
        metafunc.parametrize("case_name", _sampled(RENAME_SAMPLE)(every))


def test_the_samples_cover_every_stratum():
    strata = {_stratum(n) for n in ALL}
    for sample in (IDENTITY_SAMPLE, RENAME_SAMPLE):
        assert {_stratum(n) for n in sample} == strata
        assert {n for n in ALL if _no_faithful_application(n)} <= set(sample)
        assert set(sample) <= set(ALL) and len(sample) < len(ALL)
    # a case without a faithful gate application is one the baseline knows
    assert all(any(k.split("::")[1] == n for k in _baseline_keys()) for n in ALL)


def _baseline_keys():
    from verify.engine import baseline

    return baseline.load()["entries"].keys()


def _rename_intermediate(rp):
    """Rename one non-persistable intermediate consistently everywhere."""
    block = rp.main.global_block()
    fixed = set(rp.fetches) | {f.name for f in rp.feeds} | {rp.loss}
    fixed |= {g.name for _, g in rp.params_grads}
    for op in block.ops:
        for name in op.output_arg_names:
            v = block.var(name)
            if not v.persistable and name not in fixed and "@" not in name:
                block._rename_var(name, name + "__renamed")
                return name
    return None


def _outcomes(case, rewrite):
    outs = []
    for rank in case.ranks:
        orig, new = case.build(rank), case.build(rank)
        rewrite(new)
        run = PassRun(orig, new)
        b = from_programs(orig.main, orig.startup)
        a = from_programs(new.main, new.startup)
        b.feeds = a.feeds = sorted(f.name for f in orig.feeds)
        outs.append(RankOutcome(rank, b, a, run=run))
    return outs


def _assert_all_equivalent(case, outs):
    for o in outs:
        from verify.ir.renames import consumer_renames

        ctx = CheckContext("identity", case.name, o.rank, o.before, o.after,
                           symbols=dict(case.symbols),
                           renames=consumer_renames(o.before, o.after))
        bad = [r for r in run_static_checks(ctx) if r.verdict != Verdict.EQUIVALENT]
        assert not bad, [r.message for r in bad]
    num = numeric_checks(case, outs, backends=("simulated",), seed=1)
    bad = [r for r in num if r.verdict != Verdict.EQUIVALENT]
    assert num and not bad, [r.message for r in bad]


def test_identity_rewrite_is_equivalent(case_name):
    case = cases.all_cases()[case_name].numeric_twin()
    _assert_all_equivalent(case, _outcomes(case, lambda rp: None))


def test_consistent_rename_is_equivalent(case_name):
    case = cases.all_cases()[case_name].numeric_twin()
    renamed = []
    outs = _outcomes(case, lambda rp: renamed.append(_rename_intermediate(rp)))
    assert any(renamed), "nothing to rename"
    _assert_all_equivalent(case, outs)


@pytest.mark.parametrize("pass_short,case_name", [
    ("overlap", "col_window_reads_xgrad"), ("overlap", "col_3d_static"),
    ("promotion", "row_dp_mp_o1_sgd"), ("promotion", "row_mp_o0_sgd_clip_tp2")])
def test_rerun_gives_identical_verdicts_and_numbers(pass_short, case_name):
    _, numeric = pick_backend("simulated", 7)
    runs = []
    for _ in range(2):
        app = run_application(passes.get(pass_short), cases.all_cases()[case_name],
                              numeric=numeric)
        d = app.to_dict(with_programs=False)
        runs.append(_without_timings(d))
    assert runs[0] == runs[1]


def _without_timings(d):
    """The report minus wall-clock and CPU times (the only things a rerun may
    change; the value proof's budget is in work units and rlimits, compared)."""
    if isinstance(d, dict):
        return {k: _without_timings(v) for k, v in d.items()
                if k not in ("seconds", "cpu_seconds")}
    if isinstance(d, list):
        return [_without_timings(v) for v in d]
    return d

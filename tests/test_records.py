from harness.records import AttnCallsRecord, RankCalls, StepTiming, TimingRecord


def test_validity_requires_calls_on_every_rank_and_no_fallback_or_error():
    ok = AttnCallsRecord(
        requested="x", ranks={"0": RankCalls(calls={"x": 3}), "1": RankCalls(calls={"x": 3})}
    )
    assert ok.validity() == (True, [])
    assert ok.total() == 6
    idle = AttnCallsRecord(
        requested="x", ranks={"0": RankCalls(calls={"x": 3}), "1": RankCalls(calls={"y": 3})}
    )
    assert idle.validity() == (False, ["rank 1: requested backend 'x' served no call"])
    fb = AttnCallsRecord(requested="x", ranks={"0": RankCalls(calls={"x": 3}, fallbacks={"torch_sdpa": 1})})
    assert fb.validity() == (False, ["rank 0: 1 call(s) fell back to 'torch_sdpa'"])
    assert fb.total_fallbacks() == 1
    err = AttnCallsRecord(
        requested="x", ranks={"0": RankCalls(calls={"x": 3}, errors=["terminated by SIGTERM"])}
    )
    assert err.validity() == (False, ["rank 0: terminated by SIGTERM"])
    assert AttnCallsRecord(requested="x").validity() == (False, ["no attention calls were recorded"])


def test_s_per_step_excludes_first_step():
    t = TimingRecord(
        source="builtin", steps=[StepTiming(index=i, seconds=s) for i, s in [(1, 9.0), (2, 2.0), (3, 4.0)]]
    )
    assert t.dit_steps == 3
    assert t.s_per_step == 3.0
    assert TimingRecord(source="b", steps=[StepTiming(index=1, seconds=5.0)]).s_per_step == 5.0
    assert TimingRecord(source="b").s_per_step is None

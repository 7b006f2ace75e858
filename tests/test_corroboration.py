"""The judge's clock against claimed times, on wall times like those measured on the H200
(bench/results/evaluator-h200/diag.txt): an honest candidate passes, a forged claim is quarantined."""
from runners.judge import corroborate

MS = 1000.0  # the judge works in microseconds


def walls(*ms):
    return [m * MS for m in ms]


def test_identical_kernels_at_decode_pass_despite_a_noisy_clock():
    # rms_norm T=1,H=4096 fp16: 2048 calls of 1.44 us in a pass; a fresh candidate process ran slower passes
    v = corroborate(walls(55.6, 7.0, 6.0), walls(2.95, 2.95, 2.95), walls(55.9, 9.7, 8.3), 1.444, 1.455, 0.05, 150)
    assert v.ok and v.allowed > 1.0  # the clock cannot resolve decode sizes finely: it says so


def test_a_gross_forgery_at_decode_is_caught():
    v = corroborate(walls(55.6, 7.0, 6.0), walls(2.95, 2.95, 2.95), walls(55.9, 9.7, 8.3), 1.444, 0.144, 0.05, 150)
    assert not v.ok and v.claimed > 9


def test_prefill_sizes_are_resolved_to_about_a_quarter():
    args = (walls(11.97, 11.89, 12.05), walls(10.2, 10.2, 10.2), walls(11.93, 11.86, 11.72))
    honest = corroborate(*args, 38.6, 38.4, 0.05, 150)
    assert honest.ok and 0.95 < honest.judge_speedup < 1.1 and honest.allowed < 0.3
    forged = corroborate(*args, 38.6, 38.6 / 1.35, 0.05, 150)  # claims 1.35x, the clock saw about 1.0x
    assert not forged.ok


def test_a_truly_faster_candidate_is_not_held_back():
    # the candidate's passes are really shorter: its claim of 1.5x matches the clock
    v = corroborate(walls(12.0, 12.0, 12.0), walls(10.2, 10.2, 10.2), walls(8.6, 8.6, 8.6), 38.6, 25.7, 0.05, 150)
    assert v.ok and 1.4 < v.judge_speedup < 1.7

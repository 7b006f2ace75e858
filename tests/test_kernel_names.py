"""A candidate's own kernel may not take the names torch.compile and the vendor libraries give theirs: the
profile's own-kernel share tells kernels apart by name, and a torch-only computation beside token kernels named
after inductor's counted as the candidate's own (tests/test_judge_attacks_round7.py, its GPU form). Refused at
stage ``kernel`` on any backend, unless the baseline's own kernels are named so."""
import pytest

from runners.kernel_share import borrowed_name


@pytest.mark.parametrize("name, borrowed", [
    ("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0", True), ("triton_poi_fused_mul_1", True),
    ("triton_red_fused_sum_2", True), ("cpp_fused_add_0", True), ("nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NNT", True),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", True), ("ampere_fp16_s16816gemm_fp16_128x128", True),
    ("_rms_norm_kernel", False), ("gemm_kernel", False), ("triton_rms_norm", False), ("flash_fwd_kernel", False),
])
def test_names_torch_compile_and_libraries_use(name, borrowed):
    assert borrowed_name(name) is borrowed


def test_a_kernel_named_after_inductors_is_refused(rms_evaluator):
    source = rms_evaluator.baseline.replace("_rms_norm_kernel", "triton_per_fused_add_mean_mul_pow_rsqrt_0")
    assert source != rms_evaluator.baseline
    ev = rms_evaluator.evaluate(source, seed=3, time_it=False, trials=1)
    assert not ev.ok and ev.stage == "kernel" and "named as torch.compile's" in ev.error, (ev.stage, ev.error)
    plain = rms_evaluator.evaluate(rms_evaluator.baseline.replace("_rms_norm_kernel", "_rms_kernel_v2"), seed=3,
                                   time_it=False, trials=1)
    assert plain.ok, plain.error


def test_a_name_borne_by_a_foreign_kernel_is_not_the_candidates():
    """Round 8's review: a token kernel of the candidate's own named like a kernel of another package that does the
    work (launched through that package) would have the profile count that kernel's time as its own."""
    from runners.kernel_share import own_names

    launched = ["ks_candidate.pkg.norm:_rms_norm_forward_kernel", "liger_kernel.ops.rms_norm:_rms_norm_forward_kernel",
                "ks_candidate.pkg.norm:_token"]
    own = [k for k in launched if k.startswith("ks_candidate.")]
    assert own_names(launched, own) == {"_token"}
    assert own_names(own, own) == {"_rms_norm_forward_kernel", "_token"}

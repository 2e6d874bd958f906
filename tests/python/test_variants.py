"""The structure dispatcher's variants from Python (`variant=`): each forced variant ("tile",
"element", "split", "permuted") against the float64 reference on a scattered, a strided and a
banded-plus-global mask, forward and backward; io_count reports the variant that runs (the
forced one, or the variant planner's choice under "auto"; a forced split whose blocks' fill puts
every pair on one side runs and reports that side's kernel, as the C++ plan does); an unknown variant, or one forced
without a mask or under another schedule, is a ValueError naming it."""

import numpy as np
import pytest

import ioattn
from conftest import assert_close, make, qkv, reference, reference_backward

VARIANTS = ["tile", "element", "split", "permuted"]
SPECS = ["random:0.2", "strided:4", "window:3+global:1"]
N = 40


def allowed(spec):
    return ioattn.Mask(spec, (N, N)).to_scipy().toarray().astype(bool)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("spec", SPECS)
def test_forced_variants_match_the_reference(dtype, spec, variant):
    q, k, v = qkv(n_q=N, n_k=N, dtype=dtype, seed=3)
    want, want_lse, _ = reference(q, k, v, allowed(spec))
    out, lse = ioattn.attention(q, k, v, mask=spec, schedule="fused", variant=variant,
                                return_lse=True)
    assert_close(out, want, dtype, f"{spec} {variant}")
    assert_close(lse, want_lse, dtype, f"{spec} {variant} lse")
    dout = make(out.shape, dtype, seed=9)
    grads = ioattn.attention_backward(dout, q, k, v, out, lse, mask=spec, schedule="fused",
                                      variant=variant)
    for got, wanted, name in zip(grads, reference_backward(dout, q, k, v, allowed(spec)),
                                 ("dq", "dk", "dv")):
        assert_close(got, wanted, dtype, f"{spec} {variant} {name}")


@pytest.mark.parametrize("spec", SPECS)
def test_io_count_reports_the_variant(spec):
    auto = ioattn.io_count(n=N, d=8, mask=spec, schedule="fused")
    assert auto["variant"] in VARIANTS
    for variant in VARIANTS:
        for backward in (False, True):
            r = ioattn.io_count(n=N, d=8, mask=spec, schedule="fused", variant=variant,
                                backward=backward)
            if variant == "split":  # by fill: all pairs on one side run that side's kernel
                assert r["variant"] in ("split", "tile", "element")
            else:
                assert r["variant"] == variant
            assert r["io"]["matches_closed_form"]
    assert "variant" not in ioattn.io_count(n=N, d=8, schedule="fused")  # dense: no dispatcher


def test_bad_variants_are_value_errors():
    q, k, v = qkv(n_q=N, n_k=N, dtype=np.float32)
    with pytest.raises(ValueError, match="'bogus'"):
        ioattn.attention(q, k, v, mask="window:3", variant="bogus")
    with pytest.raises(ValueError, match="variant"):
        ioattn.attention(q, k, v, variant="element")  # no mask
    with pytest.raises(ValueError, match="variant"):
        ioattn.attention(q, k, v, mask="window:3", schedule="materialized", variant="tile")
    with pytest.raises(ValueError, match="'bogus'"):
        ioattn.io_count(n=N, d=8, mask="window:3", variant="bogus")

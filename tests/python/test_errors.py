"""Errors and their types: wrong or mixed dtypes and non-arrays are TypeError (never a cast);
bad shapes, specs, masks, M, schedules and thread counts are ValueError (ioattn.InvalidArgument)
with the library's message; ioattn.Error is a RuntimeError and the base of CapacityError."""

import numpy as np
import pytest

import ioattn
from conftest import qkv


def test_error_classes():
    assert issubclass(ioattn.InvalidArgument, ValueError)
    assert issubclass(ioattn.Error, RuntimeError)
    assert issubclass(ioattn.CapacityError, ioattn.Error)
    assert not issubclass(ioattn.Error, ValueError)


@pytest.mark.parametrize("cast", [np.int32, np.float16, np.complex64, ">f4"])
def test_wrong_dtype_is_a_type_error(cast):
    q, k, v = qkv(dtype=np.float32)
    with pytest.raises(TypeError, match="must all be float32 or all float64"):
        ioattn.attention(q.astype(cast), k.astype(cast), v.astype(cast))


def test_mixed_dtypes_are_a_type_error():
    q, k, v = qkv(dtype=np.float32)
    with pytest.raises(TypeError, match="k float64"):
        ioattn.attention(q, k.astype(np.float64), v)
    out, lse = ioattn.attention(q, k, v, return_lse=True)
    with pytest.raises(TypeError, match="lse float64"):
        ioattn.attention_backward(out, q, k, v, out, lse.astype(np.float64))


def test_non_arrays_are_a_type_error():
    q, k, v = qkv()
    with pytest.raises(TypeError, match="list, not a numpy.ndarray"):
        ioattn.attention(q.tolist(), k, v)


@pytest.mark.parametrize("change,message", [
    (lambda q, k, v: (q[0], k, v), "q must be 4-D"),
    (lambda q, k, v: (q, k[..., :5], v), "k has shape"),
    (lambda q, k, v: (q, k, v[:, :, :3]), "v has shape"),
    (lambda q, k, v: (q, k[:, :1].repeat(3, axis=1), v[:, :1].repeat(3, axis=1)), "kv_heads = 3"),
    (lambda q, k, v: (q[:, :, :0], k, v), "n_q = 0"),
])
def test_bad_shapes_are_value_errors(change, message):
    with pytest.raises(ValueError, match=message):
        ioattn.attention(*change(*qkv()))


@pytest.mark.parametrize("spec", ["window:-3", "nosuch:1", "window:2&", "random:2", "file:/nope"])
def test_bad_specs_are_value_errors(spec):
    with pytest.raises(ValueError, match=spec.split(":")[0]):
        ioattn.attention(*qkv(), mask=spec)
    with pytest.raises(ValueError):
        ioattn.Mask(spec, (4, 4))


def test_bad_masks():
    q, k, v = qkv(n_q=13, n_k=17)
    with pytest.raises(ValueError, match="the mask is 4 x 4"):
        ioattn.attention(q, k, v, mask=ioattn.Mask("dense", (4, 4)))
    with pytest.raises(TypeError, match="boolean"):
        ioattn.attention(q, k, v, mask=np.ones((13, 17)))
    with pytest.raises(TypeError, match="mask must be"):
        ioattn.attention(q, k, v, mask=5)
    with pytest.raises(ValueError):  # unsorted columns
        ioattn.Mask.from_csr(np.array([0, 2]), np.array([3, 1]), (1, 4))
    with pytest.raises(TypeError, match="integer dtype"):
        ioattn.Mask.from_csr(np.array([0.0, 1.0]), np.array([0]), (1, 4))


def test_bad_options_are_value_errors():
    q, k, v = qkv(d=16)
    with pytest.raises(ValueError, match=r"M = 4 words .*needs M >= \d+"):
        ioattn.attention(q, k, v, M=4)
    with pytest.raises(ValueError, match="unknown schedule 'fast'"):
        ioattn.attention(q, k, v, schedule="fast")
    with pytest.raises(ValueError, match="select"):
        ioattn.attention(q, k, v, select="guess")
    with pytest.raises(ValueError, match="num_threads = 0"):
        ioattn.attention(q, k, v, num_threads=0)
    with pytest.raises(ValueError, match="scale"):
        ioattn.attention(q, k, v, scale=-1.0)
    with pytest.raises(ValueError, match="reference schedule has no I/O model"):
        ioattn.io_count(n=64, d=16, schedule="reference")
    with pytest.raises(TypeError, match="dtype"):
        ioattn.io_count(n=64, d=16, dtype="int8")


def test_messages_name_the_call():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="^ioattn.attention: "):
        ioattn.attention(q, k[..., :3], v)
    out, lse = ioattn.attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match="^ioattn.attention_backward: lse must be 3-D"):
        ioattn.attention_backward(out, q, k, v, out, lse[..., None])

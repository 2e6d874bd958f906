"""Concurrency: the GIL is released while the kernels run, so two Python threads calling at
once both make progress, and each gets exactly the result of the same call made alone
(bitwise), forward and backward, dense and sparse; num_threads never changes a result."""

import threading

import numpy as np

import ioattn
from conftest import make, qkv


def calls(seed):
    """A dense forward, a sparse forward and a sparse backward on inputs of `seed`."""
    q, k, v = qkv(b=1, h=4, g=2, n_q=300, n_k=300, d=32, dtype=np.float32, seed=seed)
    mask = ioattn.Mask("window:16+global:2", (300, 300))
    out, lse = ioattn.attention(q, k, v, mask=mask, return_lse=True)
    dout = make(out.shape, np.float32, seed + 50)
    return [ioattn.attention(q, k, v, causal=True), out,
            *ioattn.attention_backward(dout, q, k, v, out, lse, mask=mask)]


def test_two_threads_give_the_serial_results():
    serial = {seed: calls(seed) for seed in (1, 2)}
    results, errors = {}, []

    def worker(seed):
        try:
            for _ in range(3):
                got = calls(seed)
                assert all(np.array_equal(a, b) for a, b in zip(got, serial[seed]))
            results[seed] = got
        except Exception as e:  # noqa: BLE001 (reported by the main thread)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sorted(results) == [1, 2]
    assert not np.array_equal(results[1][0], results[2][0])  # the inputs differ


def test_the_gil_is_released_while_kernels_run():
    q, k, v = qkv(b=1, h=2, g=2, n_q=512, n_k=512, d=64, dtype=np.float32, seed=3)
    ticks = []
    done = threading.Event()

    def ticker():
        while not done.is_set():
            ticks.append(1)
            done.wait(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        before = len(ticks)
        ioattn.attention(q, k, v, schedule="reference")  # a tenth of a second or more of C++
        during = len(ticks) - before
    finally:
        done.set()
        t.join()
    assert during > 10  # the ticker ran while the calls held no GIL


def test_num_threads_gives_bitwise_equal_results():
    q, k, v = qkv(b=2, h=4, g=2, n_q=200, n_k=180, d=16, seed=4)
    for mask in (None, "window:8"):
        base = ioattn.attention(q, k, v, mask=mask, num_threads=1)
        for n in (2, 4):
            assert np.array_equal(ioattn.attention(q, k, v, mask=mask, num_threads=n), base)

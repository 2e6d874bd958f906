"""Concurrency: the GIL is released while the kernels run, so Python threads calling at once
all make progress, and each gets exactly the result of the same call made alone (bitwise),
forward and backward, dense and sparse, counted and not; num_threads never changes a result."""

import threading
import time

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


def eight_calls():
    """Eight different calls (dense and sparse, forward and backward, fused and materialized,
    float and double, counted and not), each a function of no argument."""
    q, k, v = qkv(b=1, h=2, g=2, n_q=160, n_k=150, d=16, dtype=np.float32, seed=7)
    qd, kd, vd = (x.astype(np.float64) for x in (q, k, v))
    out, lse = ioattn.attention(q, k, v, mask="random:0.2", return_lse=True)
    dout = make(out.shape, np.float32, 8)
    return [
        lambda: [ioattn.attention(q, k, v, schedule="fused")],
        lambda: [ioattn.attention(q, k, v, schedule="materialized", causal=True)],
        lambda: [ioattn.attention(qd, kd, vd, mask="window:8")],
        lambda: [ioattn.attention(q, k, v, mask="bigbird:4:2:3", schedule="materialized")],
        lambda: list(ioattn.attention_backward(dout, q, k, v, out, lse, mask="random:0.2")),
        lambda: list(ioattn.attention_backward(dout, q, k, v, out, lse, mask="random:0.2",
                                               schedule="materialized")),
        lambda: [ioattn.io_count(n=200, d=16, heads=2, mask="window:8", M=2400)],
        lambda: [ioattn.io_count(n=200, d=16, heads=2, backward=True, M=4000)],
    ]


def same(a, b):
    """Bitwise-equal arrays, or equal io_count reports (dicts of counts)."""
    return a == b if isinstance(a, dict) else np.array_equal(a, b)


def test_eight_threads_of_different_kernels_give_the_serial_results():
    jobs = eight_calls()
    serial = [job() for job in jobs]
    errors = []

    def worker(i):
        try:
            for _ in range(4):
                got = jobs[i]()
                assert len(got) == len(serial[i])
                assert all(same(a, b) for a, b in zip(got, serial[i])), i
        except Exception as e:  # noqa: BLE001 (reported by the main thread)
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


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
        t0 = time.perf_counter()
        ioattn.attention(q, k, v, schedule="reference")  # a tenth of a second or more of C++
        elapsed = time.perf_counter() - t0
        during = len(ticks) - before
    finally:
        done.set()
        t.join()
    assert elapsed > 0.02  # long enough for several ticks of 1 ms
    # the ticker ran while the call held no GIL: a call holding it lets at most the tick in
    # flight finish (0 or 1); a loaded machine gives the ticker fewer than elapsed / 1 ms
    assert during >= 3


def test_num_threads_gives_bitwise_equal_results():
    q, k, v = qkv(b=2, h=4, g=2, n_q=200, n_k=180, d=16, seed=4)
    for mask in (None, "window:8"):
        base = ioattn.attention(q, k, v, mask=mask, num_threads=1)
        for n in (2, 4):
            assert np.array_equal(ioattn.attention(q, k, v, mask=mask, num_threads=n), base)

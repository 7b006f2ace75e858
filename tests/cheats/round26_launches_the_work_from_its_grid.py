"""Cheat (round 26): a token kernel credited with its namesake's device time, by launching the namesake from inside
its own launch.

runners/kernel_share.py ``attributed_us`` matches a colliding name's device events, put in the order of their links to
the launch calls that made them (the runtime's correlation id, which grows launch by launch), one by one to the
call's recorded launches of that name (runners/launches.py). But a launch is recorded when ``JITFunction.run`` is
*entered* (``_hooked`` appends before calling ``run``), and ``run`` works out the grid (a callable of the meta
parameters) before it launches anything: a kernel launched from inside the grid callable is recorded after the outer
kernel and launched before it. So the candidate's token ``_fwd_kernel`` (4 us) is given a grid whose callable launches
another package's ``_fwd_kernel`` doing the work (900 us): the record reads [own, foreign], the links [foreign, own],
and the foreign kernel's 900 us are matched to the candidate's own launch. Deterministic (one thread, no race), and
ordinary-looking code: a grid lambda that "prepares" its input with a library call.

``run(x, vendor_kernel)`` launches the token on ``x`` with ``vendor_kernel`` launched from its grid."""
import triton
import triton.language as tl


@triton.jit
def _fwd_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)


def run(x, vendor_kernel):
    n = x.numel()
    block = triton.next_power_of_2(n)

    def grid(meta):
        vendor_kernel[(1,)](x, n, BLOCK=block)  # the work: launched first, recorded second
        return (1,)

    _fwd_kernel[grid](x, n, BLOCK=block)
    return x

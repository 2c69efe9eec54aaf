"""Scalar helpers that the generated CPU kernels call, all compiled with numba.

numba has no 16-bit floats, so f16 and bf16 travel as their uint16 bit patterns and are
widened to f32 on load and rounded (to nearest even, as numpy and ml_dtypes round) on
store. Without SVML, numba's ``np.exp2``/``np.sin``/... are scalar libm calls that stop a
loop from vectorising, so float32 ``exp2f``, ``expf``, ``log2f`` and ``sinf`` are written
here branch-free (range reduction plus a polynomial) to within 2 ulp: LLVM inlines and
vectorises them. ``sinf`` is that accurate only for ``|x| < SIN_LIMIT``; a kernel flags larger
arguments (a max over int32 flags, which vectorises) and recomputes them with libm. ``f32_key`` maps
floats to integers in the same order (NaN last) so that a NaN-propagating max vectorises.
"""

from __future__ import annotations

import math
from fractions import Fraction

import llvmlite.binding as llvm
import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic


def _prefer_512_bit_vectors() -> None:
    """Let LLVM use 512-bit vectors on AVX-512 CPUs, whose tuning otherwise prefers 256-bit ones.

    The kernels are long float32 chains; measured on fused ``silu(a) * b`` (2^22 f32, 2 cores) the loop took
    0.96 ms with 512-bit vectors against 1.15 ms with 256-bit ones. numba reads the features when it first
    compiles, so this applies when luminal_lab is imported before any numba function compiles, and never
    overrides ``NUMBA_CPU_FEATURES``.
    """
    features = llvm.get_host_cpu_features().flatten()
    if numba.config.CPU_FEATURES is None and "+avx512f" in features.split(","):
        numba.config.CPU_FEATURES = features + ",-prefer-256-bit"


_prefer_512_bit_vectors()


def _no_loop_peeling() -> None:
    """Keep LLVM from peeling a loop's first iteration, for every compile in this process from now on.

    A peeled inner loop's vector part covers ``n - 1`` elements, so a row of 64 f32 (a vector of 16 lanes, interleaved
    4 times: 64 at a time) runs all of it in the scalar remainder. Measured on 256 rows of 64 (2 cores, 512-bit
    vectors), ns an element without and with peeling: a sum of exp2 0.44 against 1.80, a sum 0.09 against 0.14, a max
    0.23 against 0.30; one row of 16384: 0.39 against 0.45. The real kernels (softmax's rows, attention's 64 keys) are
    such rows, and LLVM peels them where it sees a value it can simplify after the first iteration.
    """
    llvm.set_option("luminal_lab", "-unroll-peel-max-count=0")


_no_loop_peeling()


# ---- bit casts ------------------------------------------------------------------------


@intrinsic
def f32_bits(typingctx, x):
    """The IEEE bits of a float32 as an int32."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(x), codegen


@intrinsic
def bits_f32(typingctx, bits):
    """The float32 whose IEEE bits are the low 32 bits of an integer."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        value = args[0]
        width = bits.bitwidth
        if width > 32:
            value = builder.trunc(value, ir.IntType(32))
        elif width < 32:
            value = builder.zext(value, ir.IntType(32))
        return builder.bitcast(value, ir.FloatType())

    return types.float32(bits), codegen


@intrinsic
def f16_load(typingctx, bits):
    """The float32 value of an f16 given as its uint16 bits (exact)."""
    if bits != types.uint16:
        return None

    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(bits), codegen


@intrinsic
def f16_store(typingctx, x):
    """The uint16 bits of float32 ``x`` rounded to f16 (nearest even, overflow to inf)."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.uint16(x), codegen


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` for float32s, rounded once (LLVM's fma: one instruction where the CPU has FMA)."""
    if not a == b == c == types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.fma(*args)

    return types.float32(a, b, c), codegen


@numba.njit(inline="always")
def bf16_load(bits):
    """The float32 value of a bf16 given as its uint16 bits (exact)."""
    return bits_f32(np.int64(bits) << 16)


@numba.njit(inline="always")
def bf16_store(x):
    """The uint16 bits of float32 ``x`` rounded to bf16 as ml_dtypes rounds (nearest even, NaN stays NaN)."""
    bits = np.int64(f32_bits(x)) & 0xFFFFFFFF
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    quiet_nan = (bits >> 16) | 0x40
    return np.uint16(quiet_nan if x != x else rounded)


# ---- float32 transcendentals ----------------------------------------------------------

_F = np.float32
LOG2E = _F(1.4426950408889634)
LN2_HI = _F(0.693145751953125)  # 15 significant bits: n * LN2_HI is exact for |n| < 2**9
LN2_LO = _F(0.6931471805599453 - 0.693145751953125)
# 2**f on |f| <= 1/2 and e**r on |r| <= ln(2)/2: Taylor terms up to degree 7 (truncation < 1e-8)
EXP2_C = tuple(_F(math.log(2) ** k / math.factorial(k)) for k in range(8))
EXP_C = tuple(_F(1 / math.factorial(k)) for k in range(8))
SQRT2_BITS = 0x3FB504F3
MIN_NORMAL = _F(2.0**-126)


_I = np.int32


@numba.njit(inline="always")
def _scale2(p, n):
    """``p * 2**n`` for an int32 ``n`` in [-250, 250], rounding once (subnormals and overflow included)."""
    half = n >> _I(1)
    return p * bits_f32((half + _I(127)) << _I(23)) * bits_f32((n - half + _I(127)) << _I(23))


@numba.njit(inline="always")
def _exp_result(x, n, r, coefficients, zero_below):
    """``2**n * p(r)``, ``p`` the degree-7 polynomial of ``coefficients`` (lowest degree first); ``x`` itself where it
    is NaN, and 0 below ``zero_below``. LLVM unrolls the loop: the kernels still vectorise."""
    p = coefficients[7]
    for k in range(6, -1, -1):
        p = p * r + coefficients[k]
    result = _scale2(p, np.int32(n))
    return x if x != x else (_F(0.0) if x < zero_below else result)


@numba.njit(inline="always")
def exp2f(x):
    """2**x for float32 ``x``, within 2 ulp."""
    # below -150 the result is 0: computing it from 0 instead keeps the lane off the (slow) subnormal path,
    # which matters in softmax, where masked scores are -inf
    clamped = _F(0.0) if x < _F(-150.0) else min(x, _F(130.0))
    n = np.rint(clamped)
    return _exp_result(x, n, clamped - n, EXP2_C, _F(-150.0))


@numba.njit(inline="always")
def expf(x):
    """e**x for float32 ``x``, within 2 ulp (Cody-Waite reduction by ln 2)."""
    clamped = _F(0.0) if x < _F(-104.0) else min(x, _F(100.0))  # below -104 the result is 0, as in exp2f
    n = np.rint(clamped * LOG2E)
    return _exp_result(x, n, (clamped - n * LN2_HI) - n * LN2_LO, EXP_C, _F(-104.0))


@numba.njit(inline="always")
def log2f(x):
    """log2(x) for float32 ``x``, within 2 ulp; NaN below 0, -inf at 0."""
    subnormal = x < MIN_NORMAL
    scaled = x * _F(8388608.0) if subnormal else x
    bits = np.int64(f32_bits(scaled))
    exponent = ((bits >> 23) & 0xFF) - (150 if subnormal else 127)
    mantissa = (bits & 0x7FFFFF) | 0x3F800000
    if mantissa > SQRT2_BITS:  # keep m in [sqrt(1/2), sqrt(2)) so log(m) is small
        mantissa -= 0x00800000
        exponent += 1
    m = np.float64(bits_f32(mantissa))
    s = (m - 1.0) / (m + 1.0)  # log(m) = 2 atanh(s), |s| < 0.172
    s2 = s * s
    log_m = 2.0 * s * (1.0 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (1.0 / 9 + s2 / 11)))))
    result = _F(exponent + log_m * 1.4426950408889634)
    special = x if x == np.inf else (_F(-np.inf) if x == 0 else _F(np.nan))
    return result if (x > 0 and x < np.inf) else special


KEY_MIN = np.int32(-(2**31))


@numba.njit(inline="always")
def f32_key(x):
    """An int32 that orders float32s as their values do, NaN (of either sign) above everything, so a max over
    keys (which LLVM vectorises) is a NaN-propagating max over the floats."""
    bits = f32_bits(x)
    key = bits ^ ((bits >> _I(31)) & _I(0x7FFFFFFF))
    return _I(0x7FFFFFFF) if (bits & _I(0x7FFFFFFF)) > _I(0x7F800000) else key


@numba.njit(inline="always")
def key_f32(key):
    """The float32 of an ``f32_key`` (the key of NaN gives NaN)."""
    return bits_f32(key ^ ((key >> _I(31)) & _I(0x7FFFFFFF)))


def _pi_over_2_parts() -> tuple[float, float, float]:
    """pi/2 as the sum of three float32s, each the nearest float32 to what the ones before leave."""
    rest = Fraction("3.14159265358979323846264338327950288419716939937510582097494459") / 2
    parts = []
    for _ in range(3):
        parts.append(float(np.float32(float(rest))))
        rest -= Fraction(parts[-1])
    return parts[0], parts[1], parts[2]


PIO2_1, PIO2_2, PIO2_3 = (_F(part) for part in _pi_over_2_parts())
TWO_OVER_PI = _F(2 / math.pi)
SIN_LIMIT = _F(1e6)  # below it sinf is within 2 ulp (measured near every multiple of pi/2 too)
SIN_C = tuple(_F((-1) ** k / math.factorial(2 * k + 1)) for k in range(5))  # sin r: r**1 ... r**9
COS_C = tuple(_F((-1) ** k / math.factorial(2 * k)) for k in range(6))  # cos r: r**0 ... r**10


@numba.njit(inline="always")
def sinf(x):
    """sin(x) for float32 ``|x| < SIN_LIMIT``: Cody-Waite reduction by pi/2 in three fused multiply-adds, then
    the quadrant's Taylor polynomial on |r| <= pi/4; NaN at +-inf and NaN."""
    k = np.rint(x * TWO_OVER_PI)
    r = fma(-k, PIO2_1, x)
    r = fma(-k, PIO2_2, r)
    r = fma(-k, PIO2_3, r)
    r2 = r * r
    sin_r = r + r * r2 * (SIN_C[1] + r2 * (SIN_C[2] + r2 * (SIN_C[3] + r2 * SIN_C[4])))
    cos_r = COS_C[0] + r2 * (COS_C[1] + r2 * (COS_C[2] + r2 * (COS_C[3] + r2 * (COS_C[4] + r2 * COS_C[5]))))
    quadrant = np.int32(k if abs(k) < TWO_OVER_PI * SIN_LIMIT else _F(0.0)) & _I(3)  # NaN and inf convert to 0
    value = sin_r if quadrant & _I(1) == 0 else cos_r
    return -value if quadrant >= 2 else value


@numba.njit(inline="always")
def fmod_int(x, y):
    """C's truncated remainder of integers; 0 for a zero divisor, as numpy's fmod gives."""
    if y == 0 or y == -1:
        return x - x
    r = x % y
    return r - y if (r != 0 and (r < 0) != (x < 0)) else r

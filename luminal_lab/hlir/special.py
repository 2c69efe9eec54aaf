"""GraphTensor's special functions (erf, erfc, erfinv, lgamma, digamma, polygamma, i0, i1): approximations made of
elementwise ops (series, polynomials, reflections), each named in its method's docstring.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .creation import TensorBase, high_level
from .elementwise import _horner, where

if TYPE_CHECKING:
    from .tensor import GraphTensor

_ZETA_TERMS = 20  # terms of the Hurwitz zeta summed before its Euler–Maclaurin tail
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66)  # B₂, B₄, ... B₁₀
_BESSEL_TERMS = 23  # of the power series below |x| = 15: the terms left out are below 1e-9 of the sum there
_BESSEL_SWITCH = 15.0


class SpecialOps(TensorBase):
    @high_level
    def erf(self) -> GraphTensor:
        """Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7), odd-extended."""
        x = self._float()
        ax = x.abs()
        t = (1 + 0.3275911 * ax).reciprocal()
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        return x.sign() * (1 - poly * (-(ax * ax)).exp())

    @high_level
    def erfc(self) -> GraphTensor:
        """``1 - erf(x)`` without the cancellation: A&S 7.1.26's tail for ``|x|``, reflected for negative ``x``."""
        x = self._float()
        ax = x.abs()
        t = (1 + 0.3275911 * ax).reciprocal()
        poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
        tail = poly * (-(ax * ax)).exp()
        return where(x.lt(0), 2 - tail, tail)

    @high_level
    def erfinv(self) -> GraphTensor:
        """Inverse error function: Giles' single-precision polynomials in ``w = -log(1 - x²)``."""
        x = self._float()
        w = -((1 - x) * (1 + x)).log()
        central, tail = w - 2.5, w.sqrt() - 3
        p = _horner(central, (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                              -0.00125372503, -0.00417768164, 0.246640727, 1.50140941))
        q = _horner(tail, (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                           -0.0076224613, 0.00943887047, 1.00167406, 2.83297682))
        out = where(w.lt(5), p, q) * x
        return where(x.abs().eq(1), x * math.inf, out)

    @high_level
    def lgamma(self) -> GraphTensor:
        """log|Γ(x)|: shifted up by 8 and Stirling's series; reflection ``log(π/|sin πx|) - lgamma(1-x)`` below 0.5."""
        x = self._float()
        reflect = x.lt(0.5)
        z = where(reflect, 1 - x, x)
        shifted, product = z + 8, z
        for k in range(1, 8):
            product = product * (z + k)
        inverse = shifted.reciprocal()
        series = inverse * _horner(inverse * inverse, (1 / 1260, -1 / 360, 1 / 12))
        positive = (shifted - 0.5) * shifted.log() - shifted + 0.5 * math.log(2 * math.pi) + series - product.log()
        sine = (x.fmod(2) * math.pi).sin().abs()
        reflected = math.log(math.pi) - sine.log() - positive
        out = where(reflect, reflected, positive)
        return where(x.eq(math.inf) | x.eq(-math.inf), math.inf, out)

    @high_level
    def digamma(self) -> GraphTensor:
        """ψ(x): shifted up by 6 and the asymptotic series; reflection ``ψ(1-x) - π/tan(πx)`` below 0.5."""
        x = self._float()
        reflect = x.lt(0.5)
        z = where(reflect, 1 - x, x)
        shift = z.reciprocal()
        for k in range(1, 6):
            shift = shift + (z + k).reciprocal()
        w = z + 6
        inverse2 = (w * w).reciprocal()
        series = w.log() - 0.5 * w.reciprocal() - inverse2 * _horner(inverse2, (1 / 252, -1 / 120, 1 / 12))
        positive = series - shift
        reduced = x.fmod(1) * math.pi  # tan has period π
        reflected = positive - math.pi * reduced.cos() / reduced.sin()
        out = where(reflect, reflected, positive)
        pole = x.lt(0.5) & x.eq(x.trunc())
        out = where(pole, where(x.eq(0), -math.inf, math.nan), out)
        return where(x.eq(math.inf), math.inf, where(x.eq(-math.inf), math.nan, out))

    @high_level
    def polygamma(self, n: int) -> GraphTensor:
        """ψ⁽ⁿ⁾(x) for n >= 1: ``(-1)^(n+1) n! ζ(n+1, x)``, the Hurwitz zeta summed directly over twenty terms, then
        Euler–Maclaurin's tail (as torch's Cephes-derived zeta; n = 0 is ``digamma``)."""
        if n == 0:
            return self.digamma()
        x = self._float()
        s = n + 1
        total = x.pow(-s)
        for k in range(1, _ZETA_TERMS):
            total = total + (x + k).pow(-s)
        w = x + _ZETA_TERMS
        tail = w.pow(1 - s) * (1 / (s - 1)) + w.pow(-s) * 0.5
        rising = 1.0
        for j, bernoulli in enumerate(_BERNOULLI, start=1):
            rising *= (s + 2 * j - 2) * ((s + 2 * j - 3) if j > 1 else 1)
            tail = tail + w.pow(-s - 2 * j + 1) * (bernoulli * rising / math.factorial(2 * j))
        return (total + tail) * ((-1) ** (n + 1) * math.factorial(n))

    @high_level
    def i0(self, scaled: bool = False) -> GraphTensor:
        """Modified Bessel function I₀ (times ``exp(-|x|)`` when ``scaled``): its power series below 15, the
        asymptotic expansion above."""
        return _bessel_i(self._float(), 0, scaled)

    @high_level
    def i1(self, scaled: bool = False) -> GraphTensor:
        """Modified Bessel function I₁ (times ``exp(-|x|)`` when ``scaled``)."""
        x = self._float()
        magnitude = _bessel_i(x, 1, scaled)
        return where(x.lt(0), -magnitude, magnitude)


def _bessel_i(x: GraphTensor, order: int, scaled: bool) -> GraphTensor:
    """|I_order(x)| for order 0 or 1 (times ``exp(-|x|)`` when ``scaled``)."""
    a = x.abs()
    small = where(a.lt(_BESSEL_SWITCH), a, 0.0)
    # sum over k of (x²/4)^k / (k! (k + order)!), by Horner's rule in x²/4 (times x/2 for order 1)
    series = [1 / (math.factorial(k) * math.factorial(k + order)) for k in reversed(range(_BESSEL_TERMS))]
    total = _horner(small * small * 0.25, series)
    if order:
        total = total * small * 0.5
    if scaled:
        total = total * (-small).exp()
    mu = 4.0 * order * order
    large = where(a.lt(_BESSEL_SWITCH), _BESSEL_SWITCH, a)
    inverse = (8 * large).reciprocal()
    factors = [1.0]  # of 1/(8x)^k in the asymptotic series, k = 0..5
    for k in range(1, 6):
        factors.append(factors[-1] * -(mu - (2 * k - 1) ** 2) / k)
    root = (2 * math.pi * large).rsqrt() * _horner(inverse, factors[::-1])
    asymptotic = root if scaled else (large * 0.5).exp() * root * (large * 0.5).exp()
    return where(a.lt(_BESSEL_SWITCH), total, asymptotic)

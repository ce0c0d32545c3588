#!/usr/bin/env python3
"""Writes engine/src/ops/transformer/gelu_table.rs: the cubic pieces of the GELU gate
Φ(x) = (1 + erf(x/√2)) / 2 on [0, 8) that the `activation` operator evaluates.

Piece i covers x in [i/16, (i+1)/16). On it, with τ in [0, 1) the position inside the piece,
P_i(τ) = c0 + c1·τ + c2·τ² + c3·τ³ interpolates 2^34 · Φ(i/16 + τ/16) at the four Chebyshev
nodes of [0, 1], and each coefficient is rounded to the nearest integer. The interpolation
error of a cubic at Chebyshev nodes on a piece of width h is at most (h/2)^4 / (4! · 2^3) ·
max |Φ''''| (Φ'''' = φ''' = (3x − x³) · φ(x), at most 0.5507 in magnitude), 2.74e-9 for h = 1/16.

The script also measures, in 50-digit arithmetic on 64 points of every piece, the largest
error of the rounded coefficients against Φ, and prints it.

Requires mpmath (pip install mpmath). Run from the repository root:
    python3 scripts/gelu-table.py
"""

import mpmath

mpmath.mp.dps = 50

PIECES = 128
WIDTH = mpmath.mpf(1) / 16
SCALE = mpmath.mpf(2) ** 34
OUTPUT = "engine/src/ops/transformer/gelu_table.rs"


def phi(x):
    return (1 + mpmath.erf(x / mpmath.sqrt(2))) / 2


def cubic_through(nodes, values):
    """Monomial coefficients (c0, c1, c2, c3) of the cubic through the points."""
    matrix = mpmath.matrix([[t**k for k in range(4)] for t in nodes])
    return list(mpmath.lu_solve(matrix, mpmath.matrix(values)))


def main():
    nodes = [(1 + mpmath.cos((2 * j + 1) * mpmath.pi / 8)) / 2 for j in range(4)]
    pieces = []
    worst = mpmath.mpf(0)
    for i in range(PIECES):
        start = i * WIDTH
        values = [SCALE * phi(start + t * WIDTH) for t in nodes]
        coefficients = [int(mpmath.nint(c)) for c in cubic_through(nodes, values)]
        pieces.append(coefficients)
        for j in range(64):
            t = mpmath.mpf(j) / 64
            p = sum(c * t**k for k, c in enumerate(coefficients))
            worst = max(worst, abs(p / SCALE - phi(start + t * WIDTH)))
    print(f"largest error of the rounded pieces against Φ: {mpmath.nstr(worst, 4)}")
    assert all(abs(c) < 2**35 for piece in pieces for c in piece)

    lines = [
        "//! The cubic pieces of the GELU gate, written by `scripts/gelu-table.py`; do not edit.",
        "",
        "/// Piece i: the coefficients (c0, c1, c2, c3) of the cubic in τ in [0, 1) that",
        "/// approximates 2^34 · Φ(i/16 + τ/16), Φ(x) = (1 + erf(x/√2)) / 2, on x in [i/16, (i + 1)/16).",
        f"pub(super) const GELU_PIECES: [[i64; 4]; {PIECES}] = [",
    ]
    for piece in pieces:
        lines.append("    [" + ", ".join(str(c) for c in piece) + "],")
    lines.append("];")
    with open(OUTPUT, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    print(f"wrote {OUTPUT}")


if __name__ == "__main__":
    main()

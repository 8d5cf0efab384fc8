"""Cost per release of the released-noise sampler (issue 13, finding 7).

Side by side in one run, for releases of 1 to 8,288 rows (a wide GROUP BY): the exact discrete Gaussian
from the CSPRNG (``lapras.mechanisms.noise``, OpenDP's sampler, as the engine releases noise now) against
numpy's PCG64 floating-point Gaussian (what it released before). Prints medians per release and per row
and the ratio, and writes benchmarks/results/noise_cost.json.

    .venv/bin/python benchmarks/noise_cost.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lapras.mechanisms import Cost, Gaussian  # noqa: E402

SIZES = (1, 10, 100, 1000, 8288)


def median_ms(fn, repeats: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    rng = np.random.default_rng()
    mech = Gaussian.calibrate(Cost(mu=0.3), 1.0, dims=8288)
    mech.release(np.zeros(1), 1.0)  # load the sampler once
    rows = []
    print(f"load average {os.getloadavg()[0]:.1f}; median of {args.repeats} releases")
    print(f"{'rows':>6} {'discrete CSPRNG ms':>19} {'numpy float ms':>15} {'ratio':>7} {'us/row (discrete)':>18}")
    for n in SIZES:
        exact = rng.integers(0, 1000, n).astype(float)
        scale = np.ones(n)
        # Interleaved so both see the same machine load.
        secure = median_ms(lambda exact=exact, scale=scale: mech.release(exact, scale), args.repeats)
        plain = median_ms(lambda exact=exact: exact + rng.normal(0.0, mech.sigma, exact.shape), args.repeats)
        rows.append({"rows": n, "discrete_ms": secure, "float_ms": plain, "ratio": secure / plain,
                     "discrete_us_per_row": secure * 1e3 / n})
        print(f"{n:>6} {secure:>19.3f} {plain:>15.4f} {secure / plain:>7.0f} {secure * 1e3 / n:>18.1f}")
    out = Path(__file__).resolve().parent / "results" / "noise_cost.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"load_average": os.getloadavg()[0], "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

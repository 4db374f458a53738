"""Summary statistics and the plain-text tables the benchmark prints and saves."""

import json
import os
import statistics


def quantile(xs, q):
    """Linear-interpolated quantile of a non-empty list (q in [0, 1])."""
    s = sorted(xs)
    if len(s) == 1:
        return s[0]
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summary(xs):
    """n, median, p10, p90, p99, mean, min, max of a list of numbers."""
    return {
        "n": len(xs),
        "median": statistics.median(xs),
        "p10": quantile(xs, 0.10),
        "p90": quantile(xs, 0.90),
        "p99": quantile(xs, 0.99),
        "mean": statistics.fmean(xs),
        "min": min(xs),
        "max": max(xs),
    }


def table(headers, rows, align=None):
    """Monospace table; `align` is a string of 'l'/'r' per column (default: first left)."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    align = align or "l" + "r" * (len(headers) - 1)

    def fmt(row):
        return "  ".join(c.ljust(w) if a == "l" else c.rjust(w)
                         for c, w, a in zip(row, widths, align)).rstrip()

    line = "  ".join("-" * w for w in widths)
    return "\n".join([fmt(headers), line, *(fmt(r) for r in cells)])


def f1(x):
    return f"{x:.1f}"


def f2(x):
    return f"{x:.2f}"


def latency_row(name, s, unit_div, fmt, note=""):
    """A row of the latency table from a summary of raw values divided by unit_div."""
    return [name, s["n"], fmt(s["median"] / unit_div), fmt(s["p10"] / unit_div),
            fmt(s["p90"] / unit_div), fmt(s["p99"] / unit_div), fmt(s["mean"] / unit_div),
            note]


def write_out(text, data):
    """With BENCH_OUT set: `text` written there, `data` as JSON beside it (.json)."""
    out = os.environ.get("BENCH_OUT")
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
        with open(os.path.splitext(out)[0] + ".json", "w") as f:
            json.dump(data, f)

"""Tests for varuna.trace's checks of the spans it draws.

Run: python3 -m pytest -q python/tests
"""

import json

import pytest

from varuna import trace


def span(**fields):
    e = {"name": "F0", "ph": "X", "pid": 0, "tid": 0, "ts": 0, "dur": 10}
    e.update(fields)
    return e


@pytest.mark.parametrize("fields,match", [
    ({"ts": float("nan")}, r"span 'F0' \(ts NaN\): 'ts' must be a finite number"),
    ({"ts": float("inf")}, r"span 'F0' \(ts Infinity\): 'ts' must be a finite number"),
    ({"dur": float("inf")}, r"span 'F0' \(ts 0\): 'dur' must be a finite number.*Infinity"),
    ({"dur": float("-inf")}, r"'dur' must be a finite number.*-Infinity"),
    ({"dur": -5}, r"span 'F0' \(ts 0\): 'dur' must not be negative, not -5"),
])
def test_nonfinite_or_negative_span_times_refused(tmp_path, fields, match):
    events = [span(name="B0", ts=20), span(**fields)]
    with pytest.raises(ValueError, match=match):
        trace.render(events)
    # The command line says so (it wrote an SVG with x="nan" and exit 0).
    src, out = tmp_path / "t.json", tmp_path / "t.svg"
    src.write_text(json.dumps({"traceEvents": events}))  # NaN / Infinity, as json.load takes
    assert trace.main([str(src), "-o", str(out)]) == 1
    assert not out.exists()


def test_finite_spans_drawn():
    svg = trace.render([span(), span(name="B0", ts=10.5, dur=0)])
    assert "nan" not in svg and svg.count("<rect") == 2

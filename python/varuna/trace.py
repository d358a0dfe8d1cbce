"""Renders a varuna-run timeline (Chrome-trace JSON, ``varuna-run --trace``)
as an SVG Gantt chart -- one row per rank and lane, forward / recompute /
backward / weight-gradient (zero-bubble's W) / communication in different colours, as in the paper's Figure 7.

    python -m varuna.trace TRACE.json -o timeline.svg [--width 1200]

The JSON itself opens in https://ui.perfetto.dev or chrome://tracing."""
import argparse
import json
import sys
from html import escape

COLOURS = {"F": "#4e79a7", "R": "#f28e2b", "B": "#59a14f", "W": "#b07aa1"}
COMM = "#bab0ac"
OTHER = "#9c755f"


def colour(name: str, tid: int) -> str:
    if tid == 1:
        return COMM
    if name[:1] in COLOURS and name[1:2].isdigit():
        return COLOURS[name[0]]
    return OTHER


def render(trace: dict, width: int = 1200) -> str:
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    if not events:
        raise ValueError("the trace has no spans")
    start = min(e["ts"] for e in events)
    end = max(e["ts"] + e["dur"] for e in events)
    rows = sorted({(e["pid"], e.get("tid", 0)) for e in events})
    label_w, row_h, top = 170, 22, 30
    scale = (width - label_w - 10) / max(end - start, 1)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{top + row_h * len(rows) + 30}" font-family="sans-serif" font-size="11">',
           f'<text x="5" y="18">varuna-run timeline: {(end - start) / 1000:.1f} ms; '
           'F forward, R recompute, B backward, W backward (weights), grey communication</text>']
    for i, (pid, tid) in enumerate(rows):
        y = top + i * row_h
        lane = ("compute", "comm", "all-reduce")[tid] if tid < 3 else f"lane {tid}"
        label = f"{names.get(pid, f'rank {pid}')} {lane}"
        out.append(f'<text x="5" y="{y + 15}">{escape(label)}</text>')
        for e in events:
            if (e["pid"], e.get("tid", 0)) != (pid, tid):
                continue
            x = label_w + (e["ts"] - start) * scale
            w = max(e["dur"] * scale, 0.5)
            out.append(f'<rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="{row_h - 4}" '
                       f'fill="{colour(e["name"], e.get("tid", 0))}"><title>{escape(e["name"])} '
                       f'{e["dur"] / 1000:.2f} ms</title></rect>')
            if w > 14 and tid == 0:
                out.append(f'<text x="{x + 2:.1f}" y="{y + 15}" fill="white">'
                           f'{escape(e["name"])}</text>')
    out.append("</svg>")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--width", type=int, default=1200)
    args = ap.parse_args(argv)
    try:
        trace = json.load(open(args.trace))
        svg = render(trace, args.width)
    except (OSError, ValueError, KeyError) as e:
        print(f"varuna.trace: error: {args.trace}: {e}", file=sys.stderr)
        return 1
    with open(args.output, "w") as fh:
        fh.write(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())

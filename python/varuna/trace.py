"""Renders a varuna-run timeline (Chrome-trace JSON, ``varuna-run --trace``,
or ``varuna-plan --simulate --timeline``) as a Gantt chart -- one row per
rank and lane, forward / recompute / backward / weight-gradient (zero-bubble's
W) / communication in different colours, as in the paper's Figure 7. The
output's suffix picks the format: ``.svg`` (span names as tooltips) or
``.png`` (Pillow).

    python -m varuna.trace TRACE.json -o timeline.svg [--width 1200]
    python -m varuna.trace TRACE.json -o timeline.png --steps 5-6

``--steps N`` or ``--steps A-B`` draws only those training steps (as
varuna-run numbers them, each with its validation pass): varuna-run records
each span's step as its ``step`` argument.

The JSON itself opens in https://ui.perfetto.dev or chrome://tracing."""
import argparse
import json
import math
import os
import sys
from html import escape

COLOURS = {"F": "#4e79a7", "R": "#f28e2b", "B": "#59a14f", "W": "#b07aa1"}
COMM = "#bab0ac"
OTHER = "#9c755f"
LABEL_W, ROW_H, TOP = 170, 22, 30
#: Narrowest chart: the labels plus room for the spans.
MIN_WIDTH = LABEL_W + 100
FORMATS = (".svg", ".png")


def colour(name: str, tid: int) -> str:
    if tid == 1:
        return COMM
    if name[:1] in COLOURS and name[1:2].isdigit():
        return COLOURS[name[0]]
    return OTHER


def parse_steps(spec: str) -> tuple:
    """``N`` or ``A-B`` (inclusive) as (A, B); ValueError naming `spec`."""
    parts = spec.split("-")
    if len(parts) in (1, 2) and all(p.isdigit() for p in parts):
        first, last = int(parts[0]), int(parts[-1])
        if first <= last:
            return first, last
    raise ValueError(f"--steps {spec!r}: expected a step N or a range A-B with A <= B "
                     "(steps as varuna-run numbers them)")


def _step_of(event):
    args = event.get("args")
    return args.get("step") if isinstance(args, dict) else None


def layout(trace, width: int = 1200, steps=None) -> dict:
    """What both formats draw: the title and each row's y, label and spans'
    rectangles (x, y, w, h, colour, name, duration in ms, whether its name
    fits inside). `trace` is the Chrome-trace object ({"traceEvents": [...]})
    or its bare event array, which the format also allows; `steps` (A, B)
    keeps the spans of steps A..B only. ValueError for a trace without spans
    (of those steps) or a width below MIN_WIDTH."""
    if width < MIN_WIDTH:
        raise ValueError(f"--width {width} is too narrow: at least {MIN_WIDTH} pixels "
                         f"({LABEL_W} of them for the row labels)")
    if isinstance(trace, list):
        trace = {"traceEvents": trace}
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise ValueError("not a Chrome trace (an object with 'traceEvents', or an array "
                         "of events)")
    events = [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    for e in events:
        _check_span(e)
    names, lanes = {}, {}
    for e in trace["traceEvents"]:
        if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") in (
                "process_name", "thread_name"):
            label = e.get("args", {}).get("name") if isinstance(e.get("args"), dict) else None
            if isinstance(label, str) and e["name"] == "process_name":
                names[e.get("pid")] = label
            elif isinstance(label, str):
                lanes[(e.get("pid"), e.get("tid"))] = label
    if not events:
        others = {e.get("ph") for e in trace["traceEvents"] if isinstance(e, dict)} - {"M", None}
        raise ValueError("the trace has no complete spans (events with \"ph\": \"X\")"
                         + (f"; its {', '.join(sorted(map(str, others)))} events are not drawn"
                            if others else ""))
    if steps is not None:
        recorded = sorted({_step_of(e) for e in events if isinstance(_step_of(e), int)})
        if not recorded:
            raise ValueError("the trace records no steps (written before varuna-run "
                             "recorded them, or a simulated mini-batch): drop --steps")
        events = [e for e in events if _step_of(e) is not None
                  and steps[0] <= _step_of(e) <= steps[1]]
        if not events:
            which = (f"step {steps[0]}" if steps[0] == steps[1]
                     else f"steps {steps[0]}-{steps[1]}")
            raise ValueError(f"no spans of {which} (the trace has steps "
                             f"{recorded[0]}-{recorded[-1]})")
    start = min(e["ts"] for e in events)
    end = max(e["ts"] + e["dur"] for e in events)
    rows = sorted({(e["pid"], e.get("tid", 0)) for e in events})
    scale = (width - LABEL_W - 10) / max(end - start, 1)
    chart = {"width": width, "height": TOP + ROW_H * len(rows) + 30,
             "title": f"timeline{_steps_title(steps)}: "
                      f"{(end - start) / 1000:.1f} ms; F forward, R recompute, B backward, "
                      "W backward (weights), grey communication, brown other (all-reduce, "
                      "optimizer)",
             "rows": []}
    for i, (pid, tid) in enumerate(rows):
        y = TOP + i * ROW_H
        lane = lanes.get((pid, tid)) or (("compute", "comm", "all-reduce")[tid]
                                         if 0 <= tid < 3 else f"lane {tid}")
        spans = []
        chart["rows"].append((y, f"{names.get(pid, f'rank {pid}')} {lane}", spans))
        for e in events:
            if (e["pid"], e.get("tid", 0)) != (pid, tid):
                continue
            x = LABEL_W + (e["ts"] - start) * scale
            w = max(e["dur"] * scale, 0.5)
            spans.append({"x": x, "y": y + 2, "w": w, "h": ROW_H - 4,
                                   "fill": colour(e["name"], tid), "name": e["name"],
                                   "ms": e["dur"] / 1000, "inside": w > 14 and tid == 0})
    return chart


def _check_span(e) -> None:
    """A complete event as the format defines it: finite numeric ts and dur
    (microseconds; dur not negative), integer pid and tid; ValueError naming
    the field and the span."""
    name = e.get("name")
    if not isinstance(name, str):
        raise ValueError(f"a span without a string 'name': {json.dumps(e)[:200]}")
    for key in ("ts", "dur"):
        v = e.get(key)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"span {name!r}: {key!r} must be a number of microseconds, "
                             f"not {json.dumps(v)}")
        # json.load takes NaN and Infinity; drawn, they became x="nan".
        if not math.isfinite(v):
            raise ValueError(f"span {name!r} (ts {json.dumps(e.get('ts'))}): {key!r} must be "
                             f"a finite number of microseconds, not {json.dumps(v)}")
    if e["dur"] < 0:
        raise ValueError(f"span {name!r} (ts {json.dumps(e['ts'])}): 'dur' must not be "
                         f"negative, not {json.dumps(e['dur'])} (a span ends after it starts)")
    for key in ("pid", "tid"):
        v = e.get(key, 0)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"span {name!r}: {key!r} must be an integer, not {json.dumps(v)}")


def _steps_title(steps) -> str:
    if steps is None:
        return ""
    return f" (step {steps[0]})" if steps[0] == steps[1] else f" (steps {steps[0]}-{steps[1]})"


def render(trace, width: int = 1200, steps=None) -> str:
    """The chart as SVG text."""
    c = layout(trace, width, steps)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{c["width"]}" '
           f'height="{c["height"]}" font-family="sans-serif" font-size="11">',
           f'<text x="5" y="18">{escape(c["title"])}</text>']
    for y, label, spans in c["rows"]:
        out.append(f'<text x="5" y="{y + 15}">{escape(label)}</text>')
        for s in spans:
            out.append(f'<rect x="{s["x"]:.1f}" y="{s["y"]}" width="{s["w"]:.1f}" '
                       f'height="{s["h"]}" fill="{s["fill"]}"><title>{escape(s["name"])} '
                       f'{s["ms"]:.2f} ms</title></rect>')
            if s["inside"]:
                out.append(f'<text x="{s["x"] + 2:.1f}" y="{s["y"] + 13}" fill="white">'
                           f'{escape(s["name"])}</text>')
    out.append("</svg>")
    return "\n".join(out)


def render_png(trace, path: str, width: int = 1200, steps=None) -> None:
    """The chart as a PNG file at `path` (Pillow's default font)."""
    from PIL import Image, ImageDraw
    c = layout(trace, width, steps)
    image = Image.new("RGB", (c["width"], c["height"]), "white")
    draw = ImageDraw.Draw(image)
    draw.text((5, 8), c["title"], fill="black")
    for y, label, spans in c["rows"]:
        draw.text((5, y + 5), label, fill="black")
        for s in spans:
            draw.rectangle([s["x"], s["y"], s["x"] + s["w"], s["y"] + s["h"]], fill=s["fill"])
            if s["inside"] and draw.textlength(s["name"]) < s["w"] - 3:
                draw.text((s["x"] + 2, s["y"] + 3), s["name"], fill="white")
    image.save(path, format="PNG")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("trace")
    ap.add_argument("-o", "--output", required=True, help="timeline.svg or timeline.png")
    ap.add_argument("--width", type=int, default=1200, help="pixels (default 1200)")
    ap.add_argument("--steps", metavar="N|A-B",
                    help="only these training steps (as varuna-run numbers them)")
    args = ap.parse_args(argv)
    try:
        steps = parse_steps(args.steps) if args.steps is not None else None
    except ValueError as e:
        print(f"varuna.trace: error: {e}", file=sys.stderr)
        return 1
    suffix = os.path.splitext(args.output)[1].lower()
    if suffix not in FORMATS:
        print(f"varuna.trace: error: {args.output}: the output's suffix picks the format: "
              f"{' or '.join(FORMATS)}", file=sys.stderr)
        return 1
    try:
        with open(args.trace) as fh:
            trace = json.load(fh)
    except json.JSONDecodeError as e:
        print(f"varuna.trace: error: {args.trace} is not JSON ({e}): a varuna-run --trace "
              "or varuna-plan --timeline file", file=sys.stderr)
        return 1
    except (OSError, ValueError) as e:
        print(f"varuna.trace: error: {args.trace}: {e.strerror or e}"
              if isinstance(e, OSError) else f"varuna.trace: error: {args.trace}: {e}",
              file=sys.stderr)
        return 1
    try:
        if suffix == ".png":
            render_png(trace, args.output, args.width, steps)
        else:
            svg = render(trace, args.width, steps)
            with open(args.output, "w") as fh:
                fh.write(svg)
    except (ValueError, KeyError, TypeError) as e:
        what = f"a span without {e}" if isinstance(e, KeyError) else e
        print(f"varuna.trace: error: {args.trace}: {what}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"varuna.trace: error: cannot write {args.output}: {e.strerror or e}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

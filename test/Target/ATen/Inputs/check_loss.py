"""Compare the loss printed by varuna-eval with PyTorch's (an expected.json).

    python3 check_loss.py EVAL_OUTPUT EXPECTED_JSON [--name loss] [--rtol 1e-5]

EVAL_OUTPUT holds varuna-eval's `<name> = <value>` lines. Exits 1, printing
both numbers, if |got - want| > rtol * |want| (or the line is missing).
"""

import argparse
import json
import sys


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("output")
    ap.add_argument("expected")
    ap.add_argument("--name", default="loss")
    ap.add_argument("--rtol", type=float, default=1e-5)
    args = ap.parse_args()

    with open(args.expected) as fh:
        want = float(json.load(fh)["loss"])
    got = None
    with open(args.output) as fh:
        for line in fh:
            key, sep, value = line.partition(" = ")
            if sep and key.strip() == args.name:
                got = float(value.split()[0])
    if got is None:
        print(f"FAIL: no '{args.name} = ...' line in {args.output} "
              f"(expected {want!r} from {args.expected})", file=sys.stderr)
        return 1
    rel = abs(got - want) / max(abs(want), 1e-30)
    verdict = "OK" if rel <= args.rtol else "FAIL"
    print(f"{verdict}: varuna-eval {args.name} = {got!r}, PyTorch = {want!r} "
          f"(relative error {rel:.3g}, tolerance {args.rtol:g}; {args.expected})")
    return 0 if verdict == "OK" else 1


if __name__ == "__main__":
    sys.exit(main())

"""Writes an optimizer oracle fixture for varuna-optim-check.

    optim_fixture.py OUTDIR --optimizer sgd|adamw|lamb [--lr X] [--momentum X]
                     [--weight-decay X] [--betas B1 B2] [--eps X]
                     [--clip X|none] [--steps N] [--seed N]

Builds a few seeded fp32 parameters (a matrix, a vector, a 3-d tensor and a
scalar) and one gradient set per step, then runs the oracle:

  sgd    torch.optim.SGD(lr, momentum, weight_decay, foreach=False)
  adamw  torch.optim.AdamW(lr, betas, eps, weight_decay, foreach=False)
  lamb   the reference below (PyTorch has no LAMB), written from You et al.
         2019, Algorithm 2, in float64 NumPy

with torch.nn.utils.clip_grad_norm_(max_norm=clip) before each SGD/AdamW step
when --clip is given. OUTDIR receives param0.<i>.npy, grad.<t>.<i>.npy and
expected.<t>.<i>.npy (t = 1..steps, the parameters after step t), and
config.json: the optimizer in training-config form plus clip_grad_norm, the
parameter names and shapes, the global gradient norm of each step and the
tolerance varuna-optim-check applies.
"""

import argparse
import json
import os

import numpy as np
import torch

# Per-step gradient scales: the global norm (about 8.4 x scale for these 70
# elements) crosses 1.0 back and forth, so clipping at 1.0 (and LAMB's default
# max_grad_norm) both triggers and does not.
GRAD_SCALES = [0.02, 0.25, 0.08, 0.3, 0.05, 0.2, 0.1, 0.15, 0.04, 0.35]
PARAMS = [("encoder.weight", (8, 5)), ("encoder.bias", (5,)),
          ("conv.weight", (3, 4, 2)), ("scale", ())]


def reference_lamb(params0, grads, lr, betas, eps, weight_decay, max_grad_norm):
    """LAMB, Algorithm 2 of You et al. 2019 with apex FusedLAMB's choices:
    bias-corrected moments, decoupled weight decay added to the Adam ratio,
    trust ratio ||x|| / ||r|| for every tensor (1 if a norm is 0), and the
    gradient divided by global_norm / max_grad_norm when the global norm of
    all gradients exceeds max_grad_norm. float64 throughout."""
    b1, b2 = betas
    x = [p.astype(np.float64) for p in params0]
    m = [np.zeros_like(p) for p in x]
    v = [np.zeros_like(p) for p in x]
    out = []
    for t, gs in enumerate(grads, start=1):
        gs = [g.astype(np.float64) for g in gs]
        global_norm = np.sqrt(sum(np.sum(g * g) for g in gs))
        divisor = global_norm / max_grad_norm if global_norm > max_grad_norm else 1.0
        for i, g in enumerate(gs):
            g = g / divisor
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            m_hat = m[i] / (1 - b1 ** t)
            v_hat = v[i] / (1 - b2 ** t)
            r = m_hat / (np.sqrt(v_hat) + eps) + weight_decay * x[i]
            x_norm, r_norm = np.linalg.norm(x[i]), np.linalg.norm(r)
            ratio = x_norm / r_norm if x_norm > 0 and r_norm > 0 else 1.0
            x[i] = x[i] - lr * ratio * r
        out.append([p.astype(np.float32) for p in x])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--optimizer", required=True, choices=["sgd", "adamw", "lamb"])
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--betas", type=float, nargs=2, default=[0.9, 0.999])
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--clip", default="none")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    clip = None if args.clip == "none" else float(args.clip)
    os.makedirs(args.outdir, exist_ok=True)

    gen = torch.Generator().manual_seed(args.seed)
    params0 = [torch.randn(shape, generator=gen, dtype=torch.float32)
               for _, shape in PARAMS]
    grads = [[GRAD_SCALES[t % len(GRAD_SCALES)] *
              torch.randn(shape, generator=gen, dtype=torch.float32)
              for _, shape in PARAMS] for t in range(args.steps)]

    norms = [float(torch.sqrt(sum((g.double() ** 2).sum() for g in gs)))
             for gs in grads]
    expected = []
    if args.optimizer == "lamb":
        expected = reference_lamb(
            [p.numpy() for p in params0], [[g.numpy() for g in gs] for gs in grads],
            args.lr, args.betas, args.eps, args.weight_decay,
            clip if clip is not None else 1.0)
    else:
        params = [torch.nn.Parameter(p.clone()) for p in params0]
        if args.optimizer == "sgd":
            opt = torch.optim.SGD(params, lr=args.lr, momentum=args.momentum,
                                  weight_decay=args.weight_decay, foreach=False)
        else:
            opt = torch.optim.AdamW(params, lr=args.lr, betas=tuple(args.betas),
                                    eps=args.eps, weight_decay=args.weight_decay,
                                    foreach=False)
        for gs in grads:
            for p, g in zip(params, gs):
                p.grad = g.clone()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(params, clip)
            opt.step()
            expected.append([p.detach().numpy().copy() for p in params])

    limit = clip if clip is not None else (1.0 if args.optimizer == "lamb" else None)
    if limit is not None and limit < 10:
        # The fixture must exercise both branches of the norm test.
        assert any(n > limit for n in norms) and any(n <= limit for n in norms), norms

    for i, p in enumerate(params0):
        np.save(os.path.join(args.outdir, "param0.%d.npy" % i), p.numpy())
    for t, gs in enumerate(grads, start=1):
        for i, g in enumerate(gs):
            np.save(os.path.join(args.outdir, "grad.%d.%d.npy" % (t, i)), g.numpy())
    for t, ps in enumerate(expected, start=1):
        for i, p in enumerate(ps):
            np.save(os.path.join(args.outdir, "expected.%d.%d.npy" % (t, i)),
                    np.asarray(p, dtype=np.float32))

    opt_cfg = {"type": args.optimizer, "lr": args.lr,
               "weight_decay": args.weight_decay}
    if args.optimizer == "sgd":
        opt_cfg["momentum"] = args.momentum
    else:
        opt_cfg["betas"] = list(args.betas)
        opt_cfg["eps"] = args.eps
    config = {
        "generated_by": "test/Runtime/Inputs/optim_fixture.py",
        "optimizer": opt_cfg,
        "steps": args.steps,
        "params": [{"name": n, "shape": list(s)} for n, s in PARAMS],
        "grad_norms": norms,
        "tolerance": 1e-5 if args.optimizer == "lamb" else 1e-6,
    }
    if clip is not None:
        config["clip_grad_norm"] = clip
    with open(os.path.join(args.outdir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)


if __name__ == "__main__":
    main()

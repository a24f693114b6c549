#!/usr/bin/env python3
"""The decode example's model written plainly in PyTorch, on the same GPU, from the
weights the Rust program wrote (`decode --out DIR --weights`).

    reference.py DIR [--check] [--bench] [--modes eager,graph,compile,compile-ro]
                     [--rounds N]

--check  runs the Rust run's steps (DIR/decode.json: first token, position, the tokens
         it decoded) in float32-accumulating PyTorch, each step fed the Rust token before
         it, and checks that the logits (DIR/logits.f32) agree within bfloat16 tolerance
         and that every Rust token is PyTorch's arg-max, or a near tie (PyTorch's margin
         within twice the logits' difference); then decodes on its own and reports how
         many steps agree.
--bench  times each mode per token over the same steps: `eager`, `graph` (one step
         captured as a torch.cuda.CUDAGraph, replayed per step), `compile`
         (torch.compile, mode="max-autotune-no-cudagraphs") and `compile-ro`
         (mode="reduce-overhead"); then prints the ratios to the Rust paths' medians
         from decode.json and writes DIR/reference.json.

Rounding follows the Rust kernels: bfloat16 tensors between operations (PyTorch's
bfloat16 ops compute in float32 and round their result), RMSNorm in float32 rounded
once, float32 logits.
"""
import json
import math
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

EPS = 1e-5
HEAD = 128


def load(d):
    path = f"{d}/weights.bin"
    with open(path, "rb") as f:
        if f.read(8) != b"DECODE01":
            sys.exit(f"{path}: not a decode weights file")
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    start = 16 + n + (64 - (16 + n) % 64) % 64
    out = {}
    for t in header["tensors"]:
        count = math.prod(t["shape"])
        if t["dtype"] == "bf16":
            a = np.fromfile(path, dtype=np.int16, count=count, offset=start + t["offset"])
            out[t["name"]] = torch.from_numpy(a).view(torch.bfloat16).reshape(t["shape"]).cuda()
        else:
            a = np.fromfile(path, dtype=np.float32, count=count, offset=start + t["offset"])
            out[t["name"]] = torch.from_numpy(a).reshape(t["shape"]).cuda()
    return out


LM_HEAD_PATH = []


def lm_head_f32(x, w):
    """float32 logits of a bfloat16 product (float32 accumulation, no bfloat16 rounding):
    torch.mm's out_dtype where this torch has it, else a float32 product."""
    try:
        out = torch.mm(x, w.t(), out_dtype=torch.float32)
        if not LM_HEAD_PATH:
            LM_HEAD_PATH.append("torch.mm(bf16, bf16, out_dtype=float32)")
        return out
    except (TypeError, RuntimeError):
        if not LM_HEAD_PATH:
            LM_HEAD_PATH.append("float32 copies (torch.mm has no out_dtype here)")
        return torch.mm(x.float(), w.float().t())


class Decoder:
    def __init__(self, w, shape):
        self.s = shape
        self.w = w
        self.d, self.h, self.cache = shape["d"], shape["heads"], shape["cache"]
        self.k0 = w["k_cache"].clone()
        self.v0 = w["v_cache"].clone()
        self.kc = w["k_cache"]
        self.vc = w["v_cache"]
        self.cos = w["rope"][0]
        self.sin = w["rope"][1]
        self.token = torch.zeros(1, dtype=torch.long, device="cuda")
        self.pos = torch.zeros((), dtype=torch.long, device="cuda")
        self.places = torch.arange(self.cache, device="cuda")
        self.logits = torch.zeros(shape["vocab"], dtype=torch.float32, device="cuda")
        # float32 attention instead of scaled_dot_product_attention (whose kernels round
        # the probabilities to bfloat16 before multiplying by V): the --check run.
        self.exact = False

    def reset(self, token, pos):
        self.token.fill_(token)
        self.pos.fill_(pos)

    @staticmethod
    def rms(x, g):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * g.float()).to(torch.bfloat16)

    @staticmethod
    def rotate(t, cos, sin):
        tf = t.float()
        a, b = tf[..., :64], tf[..., 64:]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], -1).to(torch.bfloat16)

    def step(self):
        """One greedy step: reads self.token and self.pos, writes the caches at pos,
        leaves the logits, the next token and pos + 1 (all on the GPU)."""
        w, d, h = self.w, self.d, self.h
        x = w["embedding"][0][self.token]  # [1, d]
        # index_select: indexing with a 0-dim tensor would read it on the host (.item()),
        # which a CUDA graph capture forbids.
        at = self.pos.view(1)
        cos, sin = self.cos.index_select(0, at)[0], self.sin.index_select(0, at)[0]
        mask = (self.places <= self.pos).view(1, 1, 1, self.cache)
        for l in range(self.s["layers"]):
            xn = self.rms(x, w["attn_norm"][l][0])
            qkv = F.linear(xn, w["w_qkv"][l])
            q = self.rotate(qkv[0, :d].view(h, HEAD), cos, sin)
            k = self.rotate(qkv[0, d:2 * d].view(h, HEAD), cos, sin)
            v = qkv[0, 2 * d:]
            self.kc[l].index_copy_(0, at, k.view(1, d))
            self.vc[l].index_copy_(0, at, v.view(1, d))
            kk = self.kc[l].view(self.cache, h, HEAD).transpose(0, 1).unsqueeze(0)
            vv = self.vc[l].view(self.cache, h, HEAD).transpose(0, 1).unsqueeze(0)
            if self.exact:
                # float32 scores, softmax and weighted sum (as the Rust kernel).
                sc = (kk[0].float() @ q.float().unsqueeze(-1)).squeeze(-1) / math.sqrt(HEAD)
                sc = sc.masked_fill(~mask.view(1, self.cache), float("-inf"))
                o = (torch.softmax(sc, -1).unsqueeze(1) @ vv[0].float()).to(torch.bfloat16)
            else:
                o = F.scaled_dot_product_attention(q.view(1, h, 1, HEAD), kk, vv, attn_mask=mask)
            x = x + F.linear(o.reshape(1, d), w["w_o"][l])
            xn = self.rms(x, w["ffn_norm"][l][0])
            hid = F.silu(F.linear(xn, w["w_gate"][l])) * F.linear(xn, w["w_up"][l])
            x = x + F.linear(hid, w["w_down"][l])
        xn = self.rms(x, w["final_norm"][0][0])
        logits = lm_head_f32(xn, w["lm_head"][0])[0]
        self.logits.copy_(logits)
        self.token.copy_(torch.argmax(logits).view(1))
        self.pos.add_(1)
        return self.logits


def run_steps(fn, dec, first, start, steps, keep=False):
    dec.reset(first, start)
    toks, logs = [], []
    for _ in range(steps):
        lg = fn()
        if keep:
            toks.append(int(dec.token.item()))
            logs.append(lg.detach().clone())
    return toks, logs


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    d = args[0]
    check = "--check" in args
    bench = "--bench" in args
    modes = ["eager", "graph", "compile", "compile-ro"]
    rounds = 5
    for i, a in enumerate(args):
        if a == "--modes":
            modes = args[i + 1].split(",")
        if a == "--rounds":
            rounds = int(args[i + 1])
    if not torch.cuda.is_available():
        print("reference: no GPU, nothing was run")
        return
    meta = json.load(open(f"{d}/decode.json"))
    shape, first, start, steps = meta["shape"], meta["first"], meta["start"], meta["steps"]
    print(f"reference: torch {torch.__version__} on {torch.cuda.get_device_name()}, shape {shape}")
    t = time.time()
    w = load(d)
    print(f"reference: weights loaded in {time.time() - t:.1f} s")
    dec = Decoder(w, shape)
    ok = True
    if check:
        # The checked run computes what the Rust kernels compute: float32 accumulation in
        # cuBLAS (no bfloat16 split-K reductions) and float32 attention.
        reduced = torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
        dec.exact = True
        rust_tokens = meta["tokens"]
        rust = np.fromfile(f"{d}/logits.f32", dtype=np.float32).reshape(steps, shape["vocab"])
        # Teacher forcing: each step is fed the token the Rust program decoded before it,
        # so a near tie decided the other way on one side does not send the runs apart.
        dec.reset(first, start)
        worst, same, ties = 0.0, 0, 0
        with torch.no_grad():
            for i in range(steps):
                ref = dec.step().cpu().numpy()
                dec.token.fill_(rust_tokens[i])
                scale = float(np.abs(ref).max())
                diff = np.abs(rust[i] - ref)
                mx, rms = float(diff.max()) / scale, float(np.sqrt((diff ** 2).mean())) / scale
                order = np.argsort(ref)
                best = int(np.argmax(ref))
                margin = float(ref[best] - ref[order[-2]]) / scale
                worst = max(worst, mx)
                # The tolerance and the near-tie rule of the Rust program's CPU check
                # (model.rs, StepDiff): 5% largest, 1% RMS of the largest logit.
                if mx > 0.05 or rms > 0.01:
                    print(f"reference: step {i}: logits differ by {mx:.3e} (rms {rms:.3e}) of the largest")
                    ok = False
                if best == rust_tokens[i]:
                    same += 1
                elif margin <= 2 * mx:
                    ties += 1
                    print(f"reference: step {i}: near tie: Rust {rust_tokens[i]}, PyTorch {best}, margin {margin:.2e}, difference {mx:.2e}")
                else:
                    print(f"reference: step {i}: token {rust_tokens[i]}, PyTorch's arg-max {best} (margin {margin:.2e} > twice the difference {mx:.2e})")
                    ok = False
            # Decoding on its own, for how long the two agree.
            toks, _ = run_steps(dec.step, dec, first, start, steps, keep=True)
        agree = next((i for i, (a, b) in enumerate(zip(toks, rust_tokens)) if a != b), steps)
        dec.exact = False
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = reduced
        print(f"reference: {same} of {steps} Rust tokens are PyTorch's arg-max ({ties} near ties); logits within {worst:.2e} of the largest")
        print(f"reference: decoding on its own, PyTorch agrees with the Rust tokens for the first {agree} of {steps} steps")
        print(f"reference: LM head in {LM_HEAD_PATH[0] if LM_HEAD_PATH else '?'}")
    results = {}
    if bench:
        for mode in modes:
            dec.reset(first, start)
            fn = dec.step
            try:
                if mode == "graph":
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.no_grad(), torch.cuda.stream(s):
                        for _ in range(3):
                            dec.step()
                    torch.cuda.current_stream().wait_stream(s)
                    g = torch.cuda.CUDAGraph()
                    with torch.no_grad(), torch.cuda.graph(g):
                        dec.step()

                    def fn():
                        g.replay()
                        return dec.logits
                elif mode in ("compile", "compile-ro"):
                    m = "max-autotune-no-cudagraphs" if mode == "compile" else "reduce-overhead"
                    t = time.time()
                    cf = torch.compile(dec.step, mode=m)
                    with torch.no_grad():
                        for _ in range(3):
                            cf()
                    torch.cuda.synchronize()
                    print(f"reference: {mode} ({m}) compiled in {time.time() - t:.0f} s")
                    fn = cf
                times = []
                with torch.no_grad():
                    for r in range(rounds + 1):
                        dec.reset(first, start)
                        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        e0.record()
                        for _ in range(steps):
                            fn()
                        e1.record()
                        e1.synchronize()
                        if r > 0:
                            times.append(e0.elapsed_time(e1) / steps)
                    # The mode decodes the same tokens.
                    toks, _ = run_steps(fn, dec, first, start, steps, keep=True)
                med = sorted(times)[len(times) // 2]
                results[mode] = {"ms_per_token": med, "all": times, "same_tokens": toks == meta["tokens"]}
                print(f"reference: {mode:<11} {med:8.4f} ms/token  tokens {'same' if toks == meta['tokens'] else 'DIFFER'}")
            except Exception as e:  # a mode that does not run here is reported, not fatal
                print(f"reference: {mode}: did not run: {type(e).__name__}: {str(e)[:800]}")
        rust = meta.get("median_ms", {})
        if rust and results:
            best_t = min(results.items(), key=lambda kv: kv[1]["ms_per_token"])
            best_r = min(rust.items(), key=lambda kv: kv[1])
            roof = meta.get("roofline_ms")
            print(f"reference: best PyTorch {best_t[0]} {best_t[1]['ms_per_token']:.4f} ms, best Rust {best_r[0]} {best_r[1]:.4f} ms: "
                  f"PyTorch / Rust = {best_t[1]['ms_per_token'] / best_r[1]:.2f}")
            if roof:
                for k, v in results.items():
                    print(f"reference: {k:<11} {100 * roof / v['ms_per_token']:5.1f}% of the roofline ({roof:.4f} ms)")
        json.dump(results, open(f"{d}/reference.json", "w"), indent=1)
    if not ok:
        print("reference: FAILED")
        sys.exit(1)
    print("reference: done")


if __name__ == "__main__":
    main()

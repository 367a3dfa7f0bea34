#!/usr/bin/env python3
"""hf_check.py: cas logits against Hugging Face transformers on the same weights.

Run by gpu/check.sh (part b) on the GPU machine, which has torch and
transformers; Python is only the independent reference here: nothing of
cas runs in it. For each case it builds a random-init Qwen2ForCausalLM or
Qwen3ForCausalLM from a small config with a real layout (grouped-query
attention, Qwen3's q/k norm and head_dim != hidden/heads, tied and untied
embeddings), perturbs every parameter (so biases and norm weights are not
their trivial init), saves it with save_pretrained (safetensors, in the
case's dtype), runs `cas logits` on the saved folder and compares with
transformers' logits on the same inputs (two rows, the second left-padded,
positions = cumsum(mask) - 1), where the mask is 1.

Tolerances (relative to max |logit| of the reference):
  f32 weights, cas f32 vs transformers f32:            max |d| <= 1e-4
  bf16 weights, cas f32 vs transformers f32 (upcast):  max |d| <= 1e-4
  bf16 weights, cas bf16 vs transformers f32 (upcast): max |d| <= max(2 e_hf, 0.01),
      where e_hf is transformers' own bf16-vs-f32 error on the same
      weights; the argmax must agree with transformers bf16 on >= 95% of
      positions.
Matmuls in torch run without TF32. Writes --out JSON; exit status 1 when a
case fails.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

F32_TOL = 1e-4
BF16_FLOOR = 0.01
BF16_FACTOR = 2.0
ARGMAX_MIN = 0.95

# name: (arch, config kwargs, weight dtype)
CASES = [
    ("qwen2-gqa4-tied-f32", "qwen2", dict(vocab_size=2048, hidden_size=256, intermediate_size=512,
        num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=2, tie_word_embeddings=True), "f32"),
    ("qwen2-gqa4-untied-bf16", "qwen2", dict(vocab_size=2048, hidden_size=256, intermediate_size=512,
        num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=2, tie_word_embeddings=False), "bf16"),
    ("qwen3-qknorm-hd64-untied-f32", "qwen3", dict(vocab_size=2048, hidden_size=256, intermediate_size=512,
        num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=4, head_dim=64, tie_word_embeddings=False), "f32"),
    ("qwen3-qknorm-hd64-tied-bf16", "qwen3", dict(vocab_size=2048, hidden_size=256, intermediate_size=512,
        num_hidden_layers=3, num_attention_heads=8, num_key_value_heads=4, head_dim=64, tie_word_embeddings=True), "bf16"),
    # The layouts of Qwen2.5-0.5B (14 heads, GQA 7:1) and Qwen3-0.6B (head_dim
    # 128 with hidden 1024), two layers each, full vocabulary.
    ("qwen2.5-0.5b-layout-2l-bf16", "qwen2", dict(vocab_size=151936, hidden_size=896, intermediate_size=4864,
        num_hidden_layers=2, num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True), "bf16"),
    ("qwen3-0.6b-layout-2l-f32", "qwen3", dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072,
        num_hidden_layers=2, num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True), "f32"),
]


def build(arch, kw, seed):
    cls_cfg, cls_model = (Qwen2Config, Qwen2ForCausalLM) if arch == "qwen2" else (Qwen3Config, Qwen3ForCausalLM)
    cfg = cls_cfg(max_position_embeddings=4096, rms_norm_eps=1e-6, rope_theta=1e6,
                  use_sliding_window=False, attn_implementation="eager", **kw)
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict):
        rp["rope_theta"] = 1e6
    torch.manual_seed(seed)
    model = cls_model(cfg).float().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    return model


def inputs(vocab, seed, batch=2, seq=32, pad=7):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq), generator=g, dtype=torch.int64)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    mask[1, :pad] = 0
    ids[1, :pad] = 0
    return ids, mask


def hf_logits(model, ids, mask, device):
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        out = model.to(device)(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=pos.to(device))
    model.to("cpu")
    return out.logits.float().cpu()


def cas_logits(cas, model_dir, in_path, out_path, precision, timeout):
    t0 = time.time()
    r = subprocess.run([cas, "logits", "--model", model_dir, "--in", in_path, "--out", out_path,
                        "--precision", precision], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"cas logits --precision {precision} exited {r.returncode}: {r.stderr.strip()[-2000:]}")
    return load_file(out_path)["logits"].float(), time.time() - t0


def compare(got, want, mask):
    m = mask.bool()
    g, w = got[m], want[m]
    max_abs = w.abs().max().item()
    err = (g - w).abs().max().item()
    return {"max_abs_err": err, "max_abs_logit": max_abs, "rel_err": err / max_abs,
            "mean_rel_err": (g - w).abs().mean().item() / max_abs}


def argmax_agree(a, b, mask):
    m = mask.bool()
    return (a.argmax(-1)[m] == b.argmax(-1)[m]).float().mean().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cas", required=True, help="the cas binary")
    ap.add_argument("--out", required=True, help="JSON report")
    ap.add_argument("--work", default="hf_check_work", help="scratch folder for the saved models")
    ap.add_argument("--torch-device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--timeout", type=float, default=60, help="seconds per cas call")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(a.work, exist_ok=True)
    want = set(filter(None, a.cases.split(",")))
    report = {"torch": torch.__version__, "transformers": transformers.__version__, "torch_device": a.torch_device,
              "tolerances": {"f32_rel": F32_TOL, "bf16_rel_floor": BF16_FLOOR, "bf16_factor_of_hf": BF16_FACTOR,
                             "bf16_argmax_min": ARGMAX_MIN}, "cases": []}
    ok = True
    for i, (name, arch, kw, dtype) in enumerate(CASES):
        if want and name not in want:
            continue
        t0 = time.time()
        rec = {"name": name, "arch": arch, "dtype": dtype, "config": kw}
        try:
            model = build(arch, kw, seed=100 + i)
            d = os.path.join(a.work, name)
            if dtype == "bf16":
                model = model.to(torch.bfloat16)
            try:
                model.save_pretrained(d, safe_serialization=True)
            except TypeError:  # transformers versions that always write safetensors
                model.save_pretrained(d)
            if not os.path.exists(os.path.join(d, "model.safetensors")):
                raise RuntimeError(f"save_pretrained wrote no model.safetensors in {d}: {os.listdir(d)}")
            with open(os.path.join(d, "config.json")) as f:
                saved = json.load(f)
            rec["saved_config"] = {k: saved.get(k) for k in ("rope_theta", "rope_parameters", "tie_word_embeddings",
                                                              "head_dim", "dtype", "torch_dtype", "use_sliding_window")}
            ids, mask = inputs(kw["vocab_size"], seed=200 + i)
            in_path = os.path.join(d, "inputs.safetensors")
            save_file({"input_ids": ids, "attention_mask": mask}, in_path)
            ref32 = hf_logits(model.float() if dtype == "bf16" else model, ids, mask, a.torch_device)
            got32, s32 = cas_logits(a.cas, d, in_path, os.path.join(d, "cas_f32.safetensors"), "f32", a.timeout)
            rec["cas_f32_vs_hf_f32"] = compare(got32, ref32, mask)
            rec["cas_f32_s"] = s32
            passed = rec["cas_f32_vs_hf_f32"]["rel_err"] <= F32_TOL
            if dtype == "bf16":
                ref16 = hf_logits(model.to(torch.bfloat16), ids, mask, a.torch_device)
                got16, s16 = cas_logits(a.cas, d, in_path, os.path.join(d, "cas_bf16.safetensors"), "bf16", a.timeout)
                rec["hf_bf16_vs_hf_f32"] = compare(ref16, ref32, mask)
                rec["cas_bf16_vs_hf_f32"] = compare(got16, ref32, mask)
                rec["cas_bf16_vs_hf_bf16"] = compare(got16, ref16, mask)
                rec["argmax_agree_bf16"] = argmax_agree(got16, ref16, mask)
                rec["cas_bf16_s"] = s16
                tol = max(BF16_FACTOR * rec["hf_bf16_vs_hf_f32"]["rel_err"], BF16_FLOOR)
                rec["bf16_tolerance"] = tol
                passed = passed and rec["cas_bf16_vs_hf_f32"]["rel_err"] <= tol and rec["argmax_agree_bf16"] >= ARGMAX_MIN
            rec["pass"] = passed
        except Exception as e:  # a failing case is reported, the others still run
            rec["pass"] = False
            rec["error"] = f"{type(e).__name__}: {e}"
        rec["seconds"] = round(time.time() - t0, 2)
        ok = ok and rec["pass"]
        line = f"{name}: {'PASS' if rec['pass'] else 'FAIL'}"
        if "cas_f32_vs_hf_f32" in rec:
            line += f"  f32 rel {rec['cas_f32_vs_hf_f32']['rel_err']:.3g}"
        if "cas_bf16_vs_hf_f32" in rec:
            line += (f"  bf16 rel {rec['cas_bf16_vs_hf_f32']['rel_err']:.3g} (transformers bf16: "
                     f"{rec['hf_bf16_vs_hf_f32']['rel_err']:.3g}, tol {rec['bf16_tolerance']:.3g}), "
                     f"argmax agree {rec['argmax_agree_bf16']:.3f}")
        if "error" in rec:
            line += "  " + rec["error"]
        print(line, flush=True)
        report["cases"].append(rec)
    report["passed"] = ok
    with open(a.out, "w") as f:
        json.dump(report, f, indent=2)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

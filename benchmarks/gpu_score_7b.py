"""GPU scoring throughput on a 7B-shaped checkpoint, against the GPU's copy bandwidth.

Meant to run once on a lent GPU machine (no downloads: the checkpoint is made there):
    PYTHONPATH=workflow python3 benchmarks/gpu_score_7b.py --json $OUT/gpu_score_7b.json
Smaller, on a CPU:
    .venv/bin/python benchmarks/gpu_score_7b.py --hidden 1024 --layers 4 --device cpu

Writes a Llama-layout checkpoint (q_proj [hidden, hidden], k_proj [kv_heads*head_dim,
hidden] per layer, bf16 safetensors, no MLP weights), then times
  one-shot: `wqk score FOLDER --out X.parquet --device D` (read, bf16->fp32, score, write)
  resident: wqk.metrics.score_block over all layers with q/k already on the device,
and prints seconds and GB of q/k read per second beside the device-to-device copy
bandwidth. Finally checks that CPU and DEVICE scores agree to 1e-5 on a few layers.
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "workflow"))  # wqk from source
from wqk import adapters, cli
from wqk.checkpoints import open_checkpoint
from wqk.metrics import FIELDS, score_block

BOUNDED = {"symmetry", "directionality"}  # in [-1, 1]: compared absolutely, the rest relatively


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def make_checkpoint(folder, hidden, layers, heads, kv_heads, device):
    head_dim = hidden // heads
    gen = torch.Generator(device=device).manual_seed(0)
    tensors = {}
    for layer in range(layers):
        for name, rows in (("q_proj", hidden), ("k_proj", kv_heads * head_dim)):
            w = torch.randn(rows, hidden, generator=gen, device=device) * 0.02
            tensors[f"model.layers.{layer}.self_attn.{name}.weight"] = w.bfloat16().cpu()
    save_file(tensors, folder / "model.safetensors")
    config = dict(
        model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=hidden,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
        head_dim=head_dim, torch_dtype="bfloat16", wqk_synthetic=True,
    )  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    return sum(t.numel() for t in tensors.values())  # q/k parameters


def copy_bandwidth(device, gib, repeats=10):
    """Bytes read + written per second by a device-to-device copy of a `gib` GiB tensor."""
    n = int(gib * 2**30)
    src = torch.empty(n, dtype=torch.uint8, device=device).random_(0, 255)
    dst = torch.empty_like(src)
    dst.copy_(src)  # warm-up
    sync(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        dst.copy_(src)
    sync(device)
    return 2 * n * repeats / (time.perf_counter() - t0)


def blocks_of(folder):
    ckpt = open_checkpoint(str(folder))
    return list(adapters.get_adapter(ckpt.model_type, ckpt.model_id)(ckpt))


def resident_seconds(blocks, device):
    on_dev = [type(b)(b.stack, b.layer, b.q.to(device), b.k.to(device)) for b in blocks]
    score_block(on_dev[0], device)  # warm-up (kernels, cuBLAS handles)
    sync(device)
    t0 = time.perf_counter()
    for b in on_dev:
        score_block(b, device)
    sync(device)
    return time.perf_counter() - t0


def max_error(ref, got):
    """Largest difference over the fields, absolute for bounded scores, else relative."""
    worst = 0.0
    for scores_ref, scores_got in zip(ref, got):  # (per head, per layer)
        for f in FIELDS:
            a, b = np.asarray(scores_ref[f]), np.asarray(scores_got[f])
            if not np.array_equal(np.isnan(a), np.isnan(b)):
                return float("inf")
            ok = ~np.isnan(a)
            scale = 1.0 if f in BOUNDED else max(np.abs(a[ok]).max(initial=0.0), 1e-30)
            worst = max(worst, float(np.abs(a[ok] - b[ok]).max(initial=0.0)) / scale)
    return worst


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--device", default="cuda")
    p.add_argument("--copy-gib", type=float, default=2.0, help="size of the copied tensor")
    p.add_argument("--check-layers", type=int, default=2, help="layers scored on CPU too")
    p.add_argument("--json", type=Path, help="also write the numbers here")
    args = p.parse_args()
    dev = args.device
    name = torch.cuda.get_device_name() if dev.startswith("cuda") else "CPU"
    print(f"torch {torch.__version__}, device {dev} ({name}), "
          f"fp32 matmul precision {torch.get_float32_matmul_precision()}")  # fmt: skip

    with tempfile.TemporaryDirectory(prefix="wqk-7b-") as tmp:
        folder = Path(tmp) / "llama-7b-shaped"
        folder.mkdir()
        t0 = time.perf_counter()
        n_params = make_checkpoint(folder, args.hidden, args.layers, args.heads, args.kv_heads, dev)
        gen_s = time.perf_counter() - t0
        qk_gb_bf16, qk_gb_fp32 = n_params * 2 / 1e9, n_params * 4 / 1e9
        print(f"checkpoint: {args.layers} layers, hidden {args.hidden}, {args.heads} heads, "
              f"{args.kv_heads} kv heads; q/k {qk_gb_bf16:.3g} GB bf16, written in {gen_s:.1f} s")  # fmt: skip

        copy_bps = copy_bandwidth(dev, args.copy_gib)
        print(f"copy bandwidth (read + write): {copy_bps / 1e9:.1f} GB/s")

        sync(dev)
        t0 = time.perf_counter()
        rc = cli.main(["score", str(folder), "--out", f"{tmp}/scores.parquet", "--device", dev, "--quiet"])
        sync(dev)
        one_shot_s = time.perf_counter() - t0
        assert rc == 0, f"wqk score exited {rc}"

        blocks = blocks_of(folder)
        res_s = resident_seconds(blocks, dev)

        checked = np.linspace(0, len(blocks) - 1, max(1, args.check_layers)).round().astype(int)
        errors = {int(i): max_error(score_block(blocks[i], "cpu"), score_block(blocks[i], dev)) for i in set(checked)}

    rows = {
        "one-shot (wqk score, bf16 on disk)": (one_shot_s, qk_gb_bf16),
        "resident (score_block, fp32 on device)": (res_s, qk_gb_fp32),
    }
    print(f"{'':40s} {'seconds':>9s} {'GB q/k':>8s} {'GB/s':>8s} {'/ copy':>8s}")
    for label, (s, gb) in rows.items():
        print(f"{label:40s} {s:9.3f} {gb:8.3g} {gb / s:8.3g} {gb / s / (copy_bps / 1e9):8.3g}")
    ok = all(e <= 1e-5 for e in errors.values())
    print(f"CPU vs {dev} on layers {sorted(errors)}: max error {max(errors.values()):.2e} "
          f"({'OK' if ok else 'FAIL'}, tolerance 1e-5)")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(dict(
            device=name, torch=torch.__version__, args=vars(args) | {"json": str(args.json)},
            copy_GBps=copy_bps / 1e9, generate_s=gen_s, qk_GB_bf16=qk_gb_bf16,
            one_shot_s=one_shot_s, resident_s=res_s, cpu_vs_device_max_error=errors, agree=ok,
        ), indent=1))  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

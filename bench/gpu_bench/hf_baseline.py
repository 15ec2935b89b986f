#!/usr/bin/env python3
"""The PyTorch + transformers baseline for bench/gpu_bench: output tokens/s of
`LlamaForCausalLM.generate` on one GPU at the shapes tandem knows.

What it measures: for each batch size in --num-seqs, one call to
`model.generate` over a batch of random prompts of --input-len tokens (no
padding) that greedily decodes exactly --output-len new tokens per sequence
(min_new_tokens = max_new_tokens, KV cache on). The time is the wall clock
around that call, between two torch.cuda.synchronize(), so it includes the
prefill like tandem-gpu-bench's output_tokens_per_s:
num_seqs * output_len / seconds.

How: the model is a LlamaForCausalLM built from a LlamaConfig written below
for the named --shape (the same numbers as engine/model/model_shapes.cc), with
random weights made on the GPU in bf16: nothing is downloaded. One small
generate warms the kernels up first. A size that runs out of GPU memory is
recorded with "oom": true and the next size is tried; once a size takes longer
than --max-seconds-per-size, the larger ones are recorded as
"skipped_after_timeout" rather than run. Sizes run from small to large.

When torch or transformers cannot be imported, or torch sees no CUDA device,
the report is {"name": "transformers", "skipped": REASON} and the exit status
is 0. --device cpu runs the same loop on the CPU to check the script where no
GPU is (its numbers are no baseline).

Usage: hf_baseline.py --shape llama3-8b --num-seqs 1,16,64,256 \
           --input-len 512 --output-len 256 --out hf.json
"""
import argparse
import gc
import json
import sys
import time

# engine/model/model_shapes.cc, in LlamaConfig's words.
SHAPES = {
    "llama3-8b": dict(num_hidden_layers=32, hidden_size=4096, intermediate_size=14336,
                      num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                      max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
                      tie_word_embeddings=False),
    "llama2-7b": dict(num_hidden_layers=32, hidden_size=4096, intermediate_size=11008,
                      num_attention_heads=32, num_key_value_heads=32, vocab_size=32000,
                      max_position_embeddings=4096, rope_theta=10000.0, rms_norm_eps=1e-5,
                      tie_word_embeddings=False),
    "smollm2-135m": dict(num_hidden_layers=30, hidden_size=576, intermediate_size=1536,
                         num_attention_heads=9, num_key_value_heads=3, vocab_size=49152,
                         max_position_embeddings=8192, rope_theta=100000.0, rms_norm_eps=1e-5,
                         tie_word_embeddings=True),
    "toy": dict(num_hidden_layers=4, hidden_size=192, intermediate_size=512,
                num_attention_heads=6, num_key_value_heads=3, vocab_size=49152,
                max_position_embeddings=2048, rope_theta=100000.0, rms_norm_eps=1e-5,
                tie_word_embeddings=True),
    "tiny": dict(num_hidden_layers=2, hidden_size=192, intermediate_size=512,
                 num_attention_heads=6, num_key_value_heads=3, vocab_size=1024,
                 max_position_embeddings=2048, rope_theta=100000.0, rms_norm_eps=1e-5,
                 tie_word_embeddings=False),
}

WARMUP_SEQS, WARMUP_INPUT, WARMUP_OUTPUT = 2, 16, 8


def log(message):
    print(f"hf_baseline: {message}", file=sys.stderr, flush=True)


def positive_ints(text):
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma list of integers")
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"'{text}' needs positive integers")
    return values


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="llama3-8b", choices=sorted(SHAPES))
    parser.add_argument("--num-seqs", type=positive_ints, default=[1, 16, 64, 256],
                        help="comma list of batch sizes (default 1,16,64,256)")
    parser.add_argument("--input-len", type=int, default=512)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--out", default="-", help="JSON report path (default: stdout)")
    parser.add_argument("--max-seconds-per-size", type=float, default=600.0,
                        help="after a size takes longer, skip the larger ones (default 600)")
    parser.add_argument("--attn-implementation", default="sdpa",
                        help="transformers attention backend (default sdpa)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu only checks the script; its numbers are no baseline")
    args = parser.parse_args(argv)
    if args.input_len < 1 or args.output_len < 1:
        parser.error("--input-len and --output-len must be positive")
    if args.input_len + args.output_len > SHAPES[args.shape]["max_position_embeddings"]:
        parser.error(f"--input-len + --output-len exceed {args.shape}'s context")
    return args


def import_stack(device):
    """(torch, transformers, None), or (None, None, why the baseline is skipped)."""
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install's OSError
        return None, None, f"torch is not importable: {e}"
    try:
        import transformers
    except Exception as e:
        return None, None, f"transformers is not importable: {e}"
    if device == "cuda" and not torch.cuda.is_available():
        return None, None, f"torch {torch.__version__} sees no CUDA device"
    return torch, transformers, None


def build_config(transformers, shape, attn_implementation):
    config = transformers.LlamaConfig(**SHAPES[shape], hidden_act="silu", attention_bias=False,
                                      mlp_bias=False, bos_token_id=1, eos_token_id=2,
                                      pad_token_id=0, attn_implementation=attn_implementation)
    check_rope_theta(config, SHAPES[shape]["rope_theta"])
    return config


def check_rope_theta(config, want):
    """transformers 5 moves rope_theta into rope_parameters; make sure it landed."""
    params = getattr(config, "rope_parameters", None) or {}
    got = params.get("rope_theta", getattr(config, "rope_theta", None))
    if got != want:
        raise SystemExit(f"hf_baseline: LlamaConfig kept rope theta {got}, not {want}")


def build_model(torch, transformers, config, device):
    """Random bf16 weights made straight on the device (no host copy)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = transformers.LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.eval()
    dtype = next(model.parameters()).dtype
    if dtype != torch.bfloat16:
        raise SystemExit(f"hf_baseline: model weights came out {dtype}, not bf16")
    return model


def random_prompts(torch, vocab_size, num_seqs, input_len, device, seed):
    """Token ids in [3, vocab) (clear of pad, bos and eos), all attended."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab_size, (num_seqs, input_len), generator=generator)
    return ids.to(device), torch.ones_like(ids, device=device)


def synchronize(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()


def timed_generate(torch, model, ids, mask, output_len, device):
    """(seconds, new tokens per sequence) of one greedy generate."""
    synchronize(torch, device)
    start = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=output_len,
                         min_new_tokens=output_len, do_sample=False, use_cache=True,
                         pad_token_id=0)
    synchronize(torch, device)
    seconds = time.perf_counter() - start
    return seconds, out.shape[1] - ids.shape[1]


def free_memory(torch, device):
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def oom_errors(torch):
    errors = [getattr(torch, "OutOfMemoryError", None),
              getattr(torch.cuda, "OutOfMemoryError", None)]
    return tuple(e for e in errors if e is not None)


def run_size(torch, model, args, num_seqs):
    """One batch size's throughput entry; "oom": true when it did not fit."""
    entry = {"num_seqs": num_seqs, "input_len": args.input_len, "output_len": args.output_len}
    free_memory(torch, args.device)
    ids, mask = random_prompts(torch, model.config.vocab_size, num_seqs, args.input_len,
                               args.device, args.seed + num_seqs)
    try:
        seconds, new_tokens = timed_generate(torch, model, ids, mask, args.output_len,
                                             args.device)
    except oom_errors(torch) as e:
        log(f"{num_seqs} sequences: out of memory ({str(e).splitlines()[0]})")
        entry["oom"] = True
    del ids, mask
    if args.device == "cuda":
        entry["peak_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    if entry.get("oom"):
        return entry
    if new_tokens != args.output_len:
        entry["output_len"] = new_tokens
        log(f"{num_seqs} sequences: generate made {new_tokens} tokens, not {args.output_len}")
    entry["seconds"] = seconds
    entry["output_tokens_per_s"] = num_seqs * new_tokens / seconds
    log(f"{num_seqs} sequences: {seconds:.2f} s, {entry['output_tokens_per_s']:.1f} output tok/s")
    return entry


def run_sizes(torch, model, args):
    results, timed_out = [], False
    for num_seqs in args.num_seqs:
        if timed_out:
            results.append({"num_seqs": num_seqs, "input_len": args.input_len,
                            "output_len": args.output_len, "skipped_after_timeout": True})
            continue
        entry = run_size(torch, model, args, num_seqs)
        results.append(entry)
        timed_out = entry.get("seconds", 0.0) > args.max_seconds_per_size
    return results


def warm_up(torch, model, args):
    ids, mask = random_prompts(torch, model.config.vocab_size, WARMUP_SEQS,
                               min(WARMUP_INPUT, args.input_len), args.device, args.seed)
    seconds, _ = timed_generate(torch, model, ids, mask, WARMUP_OUTPUT, args.device)
    log(f"warm-up: {seconds:.2f} s")


def device_name(torch, device):
    return torch.cuda.get_device_name(0) if device == "cuda" else "cpu"


def benchmark(torch, transformers, args):
    torch.manual_seed(args.seed)
    config = build_config(transformers, args.shape, args.attn_implementation)
    start = time.perf_counter()
    model = build_model(torch, transformers, config, args.device)
    log(f"built {args.shape} on {args.device} in {time.perf_counter() - start:.1f} s")
    warm_up(torch, model, args)
    return {
        "name": "transformers",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": device_name(torch, args.device),
        "shape": args.shape,
        "dtype": "bf16",
        "attn_implementation": model.config._attn_implementation,
        "num_params": sum(p.numel() for p in model.parameters()),
        "throughput": run_sizes(torch, model, args),
    }


def write_report(report, path):
    text = json.dumps(report, indent=2) + "\n"
    if path == "-":
        sys.stdout.write(text)
    else:
        with open(path, "w") as f:
            f.write(text)
        log(f"wrote {path}")


def main(argv=None):
    args = parse_args(argv)
    torch, transformers, skipped = import_stack(args.device)
    if skipped:
        log(f"skipped: {skipped}")
        write_report({"name": "transformers", "skipped": skipped}, args.out)
        return 0
    write_report(benchmark(torch, transformers, args), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

# NCCL all-reduce bus bandwidth through PyTorch: torch.distributed.all_reduce with the
# NCCL backend, one process per GPU. The single-process C++ reference is
# xtask/cpp/nccl_ref.cu; both print the same lines and write the same CSV columns.
#
# Usage:
#   python3 nccl_torch.py [--gpus N] [--min-bytes B] [--max-bytes B] [--warmup W]
#                         [--iters I] [--csv FILE]
# Defaults: every visible GPU, 8 MiB to 1 GiB per rank (sizes double from the minimum),
# 5 warmup and 20 timed all-reduces per size. Needs at least 2 GPUs; with fewer it says
# so and exits 0.
#
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0, and no multicast in torch's symmetric
# memory): it can take a shared host's GPUs out of service. Both are set before torch is
# imported, whatever their values were.
import os

os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"

import argparse
import socket
import sys

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as e:
    print(f"nccl_torch: no PyTorch, nothing was run: {e}")
    sys.exit(0)

CSV_HEADER = "impl,ranks,bytes,time_us,algbw_gbs,busbw_gbs\n"


def parse_args():
    p = argparse.ArgumentParser(description="NCCL all-reduce bus bandwidth through PyTorch")
    p.add_argument("--gpus", type=int, default=0, help="ranks, one per GPU (default: all)")
    p.add_argument("--min-bytes", type=int, default=8 << 20, help="smallest size per rank")
    p.add_argument("--max-bytes", type=int, default=1 << 30, help="largest size per rank")
    p.add_argument("--warmup", type=int, default=5, help="untimed all-reduces per size")
    p.add_argument("--iters", type=int, default=20, help="timed all-reduces per size")
    p.add_argument("--csv", default=None, help="write the rows to this file")
    a = p.parse_args()
    if a.min_bytes < 4 or a.min_bytes % 4 != 0 or a.max_bytes < a.min_bytes:
        p.error("need 4 <= --min-bytes <= --max-bytes, --min-bytes a multiple of 4 "
                f"(got {a.min_bytes} and {a.max_bytes})")
    if a.warmup < 0 or a.iters < 1:
        p.error("need --warmup >= 0 and --iters >= 1")
    return a


def sizes(min_bytes, max_bytes):
    """min_bytes, doubled while it stays within max_bytes."""
    b = min_bytes
    while b <= max_bytes:
        yield b
        b *= 2


def nccl_version():
    """torch.cuda.nccl.version() as "major.minor.patch" (a tuple in recent torch, an int
    code in old releases)."""
    v = torch.cuda.nccl.version()
    if isinstance(v, int):
        if v >= 20900:
            v = (v // 10000, v // 100 % 100, v % 100)
        else:
            v = (v // 1000, v // 100 % 10, v % 100)
    return ".".join(str(x) for x in v)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(rank, n, port, args):
    # Inherited from the parent already; set again so a rank never runs with multicast on.
    os.environ["NCCL_NVLS_ENABLE"] = "0"
    os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"

    device = torch.device("cuda", rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=n, device_id=device)
    try:
        run(rank, n, device, args)
    finally:
        dist.destroy_process_group()


def run(rank, n, device, args):
    csv = None
    if rank == 0:
        print(f"nccl_torch: PyTorch {torch.__version__}, NCCL {nccl_version()}, {n} GPU(s)",
              flush=True)
        if args.csv:
            csv = open(args.csv, "a")  # the parent wrote the header

    t = torch.empty(args.max_bytes // 4, dtype=torch.float32, device=device)
    worst = torch.zeros(1, dtype=torch.float64, device=device)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    try:
        for nbytes in sizes(args.min_bytes, args.max_bytes):
            view = t[: nbytes // 4]
            # The sum is in place, so the values grow n-fold per all-reduce; refilling per
            # size keeps them finite at the default counts. They do not change the timing.
            t.fill_(1.0)
            for _ in range(args.warmup):
                dist.all_reduce(view)
            torch.cuda.synchronize()
            dist.barrier()

            # The events are on the current stream. ProcessGroupNCCL's stream waits for the
            # current stream before each collective, and the current stream waits for the
            # collective after it (a synchronous all_reduce), so the two events bracket the
            # I collectives. One more all-reduce before the start event ends on every GPU
            # at about the same moment, however late each process left the barrier, so
            # the timed window starts together on all ranks (as in nccl_bench --procs).
            dist.all_reduce(view)
            start.record()
            for _ in range(args.iters):
                dist.all_reduce(view)
            end.record()
            torch.cuda.synchronize()

            # The slowest rank's time, as the C++ reference takes the slowest GPU's.
            worst.fill_(start.elapsed_time(end) / args.iters)
            dist.all_reduce(worst, op=dist.ReduceOp.MAX)
            if rank == 0:
                time_s = worst.item() * 1e-3
                time_us = time_s * 1e6
                algbw = nbytes / time_s / 1e9 if time_s > 0 else 0.0
                busbw = algbw * 2 * (n - 1) / n
                print(f"size={nbytes} time_us={time_us:.2f} algbw={algbw:.2f} "
                      f"busbw={busbw:.2f}", flush=True)
                if csv:
                    csv.write(f"torch,{n},{nbytes},{time_us:.3f},{algbw:.3f},{busbw:.3f}\n")
    finally:
        if csv:
            csv.close()


def main():
    args = parse_args()
    visible = torch.cuda.device_count()
    if visible < 2:
        print(f"nccl_torch: needs 2 GPUs (found {visible}); nothing was run.")
        sys.exit(0)
    n = args.gpus or visible
    if n < 2 or n > visible:
        print(f"nccl_torch: --gpus {args.gpus}: need 2 to {visible}", file=sys.stderr)
        sys.exit(1)
    if args.csv:
        # Opened here so that a path that cannot be written fails before any rank starts;
        # rows are appended (run.sh collects every round and every program in one file),
        # the header written once, into an empty file.
        with open(args.csv, "a") as f:
            if f.tell() == 0:
                f.write(CSV_HEADER)
    mp.spawn(rank_main, args=(n, free_port(), args), nprocs=n, join=True)


if __name__ == "__main__":
    main()

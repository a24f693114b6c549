"""cudadrv embedded in PyTorch (examples/torch_embed.rs as a shared library, loaded
with ctypes): torch's tensors go to Rust as DLPack capsules on torch's current stream,
a capture torch begins is refused by the safe calls, and a Rust buffer comes back as a
torch tensor. Exit 0 when every check holds; prints "nothing was run" and exits 0
without torch or a GPU."""
import ctypes
import sys

try:
    import torch
    import torch.utils.dlpack as tdl
except ImportError as e:
    print(f"torch_embed: no PyTorch, nothing was run: {e}")
    sys.exit(0)
if not torch.cuda.is_available():
    print("torch_embed: no GPU for PyTorch, nothing was run")
    sys.exit(0)

lib = ctypes.CDLL(sys.argv[1])
lib.cudadrv_copy_head.restype = ctypes.c_int
lib.cudadrv_copy_head.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                  ctypes.c_uint64, ctypes.c_float, ctypes.c_char_p,
                                  ctypes.c_size_t]
lib.cudadrv_pointer_device.restype = ctypes.c_int
lib.cudadrv_pointer_device.argtypes = [ctypes.c_uint64]
lib.cudadrv_export_iota.restype = ctypes.c_void_p
lib.cudadrv_export_iota.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_char_p,
                                    ctypes.c_size_t]

api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.restype = ctypes.c_int
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def hand_over(t):
    """The tensor's DLPack struct, consumed: the capsule no longer deletes it."""
    cap = tdl.to_dlpack(t)
    ptr = api.PyCapsule_GetPointer(cap, b"dltensor")
    api.PyCapsule_SetName(cap, b"used_dltensor")
    return ptr


err = ctypes.create_string_buffer(512)
failures = 0


def check(cond, what):
    global failures
    print(("ok   " if cond else "FAIL ") + what)
    failures += 0 if cond else 1


n = 1 << 22
err.value = b""
stream = torch.cuda.Stream()
with torch.cuda.stream(stream):
    src = torch.arange(n, dtype=torch.float32, device="cuda") * 3.0
    dst = torch.zeros(n, dtype=torch.float32, device="cuda")
    rc = lib.cudadrv_copy_head(hand_over(src), hand_over(dst), stream.cuda_stream, 1000,
                               7.0, err, len(err))
    check(rc == 0, f"copy_head on torch's stream: rc {rc} {err.value.decode()}")
    want = src.clone()
    want[:1000] = 7.0
    check(torch.equal(dst, want), "the Rust copy and memset landed in torch's tensor")
check(lib.cudadrv_pointer_device(dst.data_ptr()) == dst.device.index,
      "pointer_info names torch's device")
check(lib.cudadrv_pointer_device(ctypes.addressof(err)) == -1,
      "pointer_info of host memory")

# A capture torch begins: the safe calls refuse the capturing stream (code 2); the two
# tensors handed over then stay with the library (a stream in capture cannot be
# synchronized before their deleters, so they are leaked, never freed early).
err.value = b""
g = torch.cuda.CUDAGraph()
a = torch.ones(1024, device="cuda")
b = torch.zeros(1024, device="cuda")
s2 = torch.cuda.Stream()
s2.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s2):
    with torch.cuda.graph(g, stream=s2):
        rc = lib.cudadrv_copy_head(hand_over(a), hand_over(b), s2.cuda_stream, 1, 5.0,
                                   err, len(err))
        b2 = b + 1  # torch's own work keeps the graph non-empty
check(rc == 2, f"safe work on torch's capturing stream refused: rc {rc} {err.value.decode()}")
g.replay()
torch.cuda.synchronize()
check(torch.equal(b2, torch.ones(1024, device="cuda")), "torch's graph still replays")

# A Rust buffer into torch, ordered by the handshake on torch's current stream.
err.value = b""
cur = torch.cuda.current_stream()
p = lib.cudadrv_export_iota(4096, cur.cuda_stream, err, len(err))
check(bool(p), f"export_iota: {err.value.decode()}")
if p:
    cap = api.PyCapsule_New(p, b"dltensor_versioned", None)
    try:
        t = tdl.from_dlpack(cap)
    except Exception as e:  # an older torch without versioned capsules
        t = None
        print(f"skip torch.from_dlpack(dltensor_versioned): {e}")
    if t is not None:
        check(t.device.type == "cuda" and t.shape == (4096,), "the exported tensor's shape")
        check(torch.equal(t, torch.arange(4096, dtype=torch.float32, device="cuda")),
              "the exported values, read by torch")
        del t
        torch.cuda.synchronize()

print(f"torch_embed: {failures} failure(s)")
sys.exit(1 if failures else 0)

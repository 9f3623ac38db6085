#!/usr/bin/env bash
# The tensor path on a GPU, in one go (issue 7): run from the repository root on a machine
# with an NVIDIA GPU and a Python that has torch with CUDA.
#
#     bash benchmarks/gpu_check.sh              # about 2-3 minutes
#     PYTHON=.venv/bin/python bash benchmarks/gpu_check.sh
#
# 1. prints what torch sees (version, CUDA, devices, memory);
# 2. starts examples/model_server.py with --device cuda (it logs nothing on success: the
#    model_info tool says where the model runs) and calls it through millimcp's client
#    (examples/model_client.py): raw tensors, 1 and 32 callers, then base64 for comparison;
# 3. runs benchmarks/model_serving.py on CUDA briefly: adaptive batching on vs off, the CNN
#    and the wide MLP, 1, 8 and 32 callers (what the batcher learned is in each run's line);
# 4. the same with fixed batching (Triton's knobs, 2 ms delay) for comparison, 32 callers;
# 5. runs benchmarks/shared_memory.py: a 1M-float32 round trip through /dev/shm vs the socket
#    (host memory: CUDA results are copied to the host before framing either way);
# 6. runs the model-hosting tests that need CUDA (skipped on a CPU): device="auto" places the
#    model on the GPU, results come back in pinned host buffers (one copy a batch, reused),
#    keep_on_device=True leaves them on the GPU.
# Quote its whole output in your note. Nothing here downloads anything.
set -euo pipefail

PY=${PYTHON:-python3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"

echo "== 1. torch and CUDA"
"$PY" - <<'EOF'
import importlib.util
import sys

needed = ("torch", "numpy", "msgspec", "uvicorn", "httptools", "uvloop", "aiohttp", "httpx")
missing = [name for name in needed if importlib.util.find_spec(name) is None]
if missing:
    sys.exit(f"missing Python packages {missing}: pip install -e '.[serve,client,torch]' httpx")
import torch

print(f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA {torch.version.cuda}")
if not torch.cuda.is_available():
    sys.exit("torch sees no GPU: nothing to check here")
for index in range(torch.cuda.device_count()):
    p = torch.cuda.get_device_properties(index)
    print(f"cuda:{index} {p.name}, {p.total_memory / 2**30:.1f} GiB, capability {p.major}.{p.minor}")
x = torch.randn(1024, 1024, device="cuda")
torch.cuda.synchronize()
print(f"matmul on cuda: {float((x @ x).sum().cpu()):.3f}; cudnn {torch.backends.cudnn.version()}")
EOF

echo
echo "== 2. examples/model_server.py --device cuda, called by examples/model_client.py"
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT/mcp"
"$PY" examples/model_server.py --port "$PORT" --device cuda &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT
"$PY" - "$PORT" <<'EOF'
import socket
import sys
import time

deadline = time.monotonic() + 120
while True:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
        break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("the model server did not start in 120 s")
        time.sleep(0.5)
EOF
"$PY" examples/model_client.py --url "$URL" --calls 20
"$PY" examples/model_client.py --url "$URL" --calls 10 --concurrency 32
"$PY" examples/model_client.py --url "$URL" --calls 10 --base64
kill "$SERVER"
wait "$SERVER" 2>/dev/null || true
trap - EXIT

echo
echo "== 3. benchmarks/model_serving.py --device cuda (adaptive batching on vs off)"
"$PY" benchmarks/model_serving.py --device cuda --rounds 2 --duration 3 --warmup 4

echo
echo "== 4. benchmarks/model_serving.py --device cuda, fixed batching (2 ms), 32 callers"
"$PY" benchmarks/model_serving.py --device cuda --rounds 2 --duration 3 --warmup 2 --callers 32 \
    --extra=--batching=fixed --extra=--max-queue-delay-ms=2

echo
echo "== 5. benchmarks/shared_memory.py (same-host tensors: /dev/shm vs the socket)"
"$PY" benchmarks/shared_memory.py --rounds 3 --calls 20

echo
echo "== 6. the model-hosting tests that need CUDA (tests/unit/tensor/test_hosting_device.py)"
"$PY" -m pytest -q -p no:cacheprovider -rs tests/unit/tensor/test_hosting_device.py \
    tests/unit/tensor/test_batching.py

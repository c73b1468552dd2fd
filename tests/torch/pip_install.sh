#!/usr/bin/env bash
# What a PyTorch user does: `pip install .` from a clone into a virtual
# environment that sees the system's torch, then the DDP example from
# outside the clone (against gloo, bitwise), a torch of another version
# refused at import with both versions named, and `pip uninstall`.
# Everything happens in a temporary directory, from a copy of the clone
# (meson-python writes a file into the source tree), offline.
#   tests/torch/pip_install.sh [PYTHON]     (default /usr/bin/python3)
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
py=${1:-/usr/bin/python3}
tmp=$(mktemp -d /tmp/ringtree-pip-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

mkdir "$tmp/clone" "$tmp/run" "$tmp/empty"
(cd "$src" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$tmp/clone"
"$py" -m venv --system-site-packages "$tmp/venv"
venv_py=$tmp/venv/bin/python
"$venv_py" -m pip install --no-index --no-build-isolation "$tmp/clone" >"$tmp/pip.log" 2>&1 || { tail -40 "$tmp/pip.log"; fail "pip install"; }

cd "$tmp/run"
unset RINGTREE_TORCH_PATH PYTHONPATH
where=$("$venv_py" -c 'import ringtree_torch; print(ringtree_torch.__file__)')
case $where in "$tmp/venv/"*) ;; *) fail "import ringtree_torch found $where, not the installed package";; esac
echo "ok: import ringtree_torch from $where"

# The example from outside the clone: its own fallback path
# (../build/python from where it lies) does not exist there.
mkdir "$tmp/run/ex" && cp "$src/examples/torch_ddp.py" "$tmp/run/ex/"
"$venv_py" "$src/tests/torch/test_example.py" "$tmp/run/ex/torch_ddp.py" "$tmp/empty" --ranks 2 || fail "the DDP example with the installed package"

# The README's second command: the example under torchrun, from the
# installed package (python -m torch.distributed.run is torchrun; the
# flags work around torch 1.13's torchrun on Python 3.11).
(cd "$tmp/run/ex" && "$venv_py" -m torch.distributed.run --redirects 2 --tee 2 --log_dir "$tmp/elastic" \
  --rdzv_backend c10d --rdzv_endpoint "localhost:$("$venv_py" -c 'import socket; s=socket.socket(); s.bind(("localhost",0)); print(s.getsockname()[1])')" \
  --nnodes 1 --nproc_per_node 2 torch_ddp.py ringtree --checkpoint "$tmp/ckpt.pt" >"$tmp/torchrun.log" 2>&1) ||
  { tail -30 "$tmp/torchrun.log"; fail "the DDP example under torchrun with the installed package"; }
grep -q "ringtree parameters sha256" "$tmp/torchrun.log" && [ -f "$tmp/ckpt.pt" ] ||
  { tail -30 "$tmp/torchrun.log"; fail "the example under torchrun did not finish its training"; }
echo "ok: torchrun runs the example on the installed package"

# A torch of another version than the one it was built for: ImportError
# naming both, before the extension is loaded.
msg=$("$venv_py" -c '
import torch
built = torch.__version__
torch.__version__ = "0.0.1+other"
try:
    import ringtree_torch
except ImportError as e:
    print(e)
else:
    print("imported")
' 2>&1)
case $msg in *"built for torch $("$venv_py" -c 'import torch; print(torch.__version__)')"*"runs torch 0.0.1+other"*"pip install"*) ;;
  *) fail "a torch of another version was not refused as expected: $msg";; esac
echo "ok: another torch refused: ${msg:0:120}..."

"$venv_py" -m pip uninstall -y ringtree-torch >/dev/null
if "$venv_py" -c 'import ringtree_torch' 2>/dev/null; then fail "ringtree_torch still importable after pip uninstall"; fi
echo "ok: pip uninstall ringtree-torch removes it"

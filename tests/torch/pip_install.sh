#!/usr/bin/env bash
# What a PyTorch user does: `pip install --no-build-isolation .` from a clone
# into a virtual environment that has torch 2.x, then the DDP example from
# outside the clone (against gloo, bitwise), the README's torchrun command,
# init_process_group("ringtree") with no import (torch's entry points), a
# torch of another version refused at import with both versions named, and
# `pip uninstall`. Everything happens in a temporary directory, from a copy
# of the clone (meson-python writes a file into the source tree), offline.
#   tests/torch/pip_install.sh TORCH_PYTHON
# TORCH_PYTHON: a Python whose environment has torch and meson-python
# (scripts/ringtree's build/torch-venv). The test's own environment sees
# them through a .pth file (not a second 5 GB copy of torch), and pip
# installs ringtree_torch into it alone.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
torch_py=$1
tmp=$(mktemp -d /tmp/ringtree-pip-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAILED: $*" >&2; exit 1; }

mkdir "$tmp/clone" "$tmp/run" "$tmp/empty"
(cd "$src" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$tmp/clone"
/usr/bin/python3 -m venv "$tmp/venv"
venv_py=$tmp/venv/bin/python
"$torch_py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' >"$("$venv_py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/torch-env.pth"
# torchrun, as the torch wheel installs it into an environment's bin/
printf '#!%s\nimport sys\nfrom torch.distributed.run import main\nsys.exit(main())\n' "$venv_py" >"$tmp/venv/bin/torchrun"
chmod +x "$tmp/venv/bin/torchrun"
# (PATH: meson-python runs the meson and ninja that it finds there.)
# Unoptimised: this checks the packaging (the wheel, its libraries, the
# entry point, the version check), not code generation. The same sources
# at -O2 are the build the torch suites run; -O0 halves what pip compiles.
PATH=$tmp/venv/bin:$(dirname "$torch_py"):$PATH "$venv_py" -m pip install --no-index --no-build-isolation \
  --config-settings=setup-args=-Doptimization=0 "$tmp/clone" >"$tmp/pip.log" 2>&1 ||
  { tail -40 "$tmp/pip.log"; fail "pip install"; }

cd "$tmp/run"
unset RINGTREE_TORCH_PATH PYTHONPATH
where=$("$venv_py" -c 'import ringtree_torch; print(ringtree_torch.__file__)')
case $where in "$tmp/venv/"*) ;; *) fail "import ringtree_torch found $where, not the installed package";; esac
echo "ok: import ringtree_torch from $where"

# The example from outside the clone: its own fallback path
# (../build/python from where it lies) does not exist there.
mkdir "$tmp/run/ex" && cp "$src/examples/torch_ddp.py" "$tmp/run/ex/"
"$venv_py" "$src/tests/torch/test_example.py" "$tmp/run/ex/torch_ddp.py" "$tmp/empty" --ranks 2 || fail "the DDP example with the installed package"

# The README's second command, as written there, on the installed package.
(cd "$tmp/run/ex" && "$tmp/venv/bin/torchrun" --standalone --nproc_per_node 2 torch_ddp.py ringtree --checkpoint "$tmp/ckpt.pt" \
  >"$tmp/torchrun.log" 2>&1) ||
  { tail -30 "$tmp/torchrun.log"; fail "the DDP example under torchrun with the installed package"; }
grep -q "ringtree parameters sha256" "$tmp/torchrun.log" && [ -f "$tmp/ckpt.pt" ] ||
  { tail -30 "$tmp/torchrun.log"; fail "the example under torchrun did not finish its training"; }
echo "ok: torchrun runs the example on the installed package"

# init_process_group("ringtree") with no `import ringtree_torch`: torch
# finds the backend through the package's entry point.
got=$("$venv_py" -c '
import torch, torch.distributed as dist, sys
dist.init_process_group("ringtree", init_method="file://'"$tmp"'/rdzv", rank=0, world_size=1)
t = torch.ones(3); dist.all_reduce(t)
b = dist.group.WORLD._get_backend(torch.device("cpu"))
print(type(b).__name__, dist.get_backend(), t.tolist(), "ringtree_torch" in sys.modules)
dist.destroy_process_group()
' 2>&1 | tail -1)
[ "$got" = "ProcessGroupRingtree ringtree [1.0, 1.0, 1.0] True" ] || fail "init_process_group(\"ringtree\") without the import: $got"
echo "ok: init_process_group(\"ringtree\") without an import finds the backend (entry point)"

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

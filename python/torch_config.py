"""What Meson needs to build ringtree_torch against the torch of this Python
(python/meson.build runs it), and the one place that says which torch
releases ringtree_torch supports.

Prints, one per line: the torch version, the compile flags that torch's own
extensions get (C++ ABI; the pybind11 ABI tags of releases that have them),
torch's include directories (joined by '|'), its library directory, and the
supported range. Exits 1, saying why on stderr, for a torch outside it.
"""
import sys

# The oldest release supported: the first in which everything the tests
# run is public API (torch.distributed.fsdp.fully_shard, torch.distributed.tensor,
# DeviceMesh). The newest tested: newer ones build with a warning.
OLDEST, NEWEST = (2, 6), (2, 15)


def release(version):
    """(major, minor) of a version string such as '2.15.0+cpu'."""
    parts = version.split("+")[0].split(".")
    return int(parts[0]), int(parts[1])


def span():
    return f"{OLDEST[0]}.{OLDEST[1]} to {NEWEST[0]}.{NEWEST[1]}"


def main():
    import torch
    from torch.utils import cpp_extension

    have = release(torch.__version__)
    if have < OLDEST:
        print(f"ringtree_torch needs PyTorch {span()} (a c10d::Backend); {sys.executable} has torch {torch.__version__} "
              f"({torch.__file__}). Install a supported one into a virtual environment, e.g. "
              f"`python3 -m venv venv && venv/bin/pip install torch=={NEWEST[0]}.{NEWEST[1]}.0`, and build from it.",
              file=sys.stderr)
        return 1
    flags = [f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
    # (torch's own helper; releases that still tag pybind11's ABI return the
    # tags, later ones nothing)
    pybind = getattr(cpp_extension, "_get_pybind11_abi_build_flags", lambda: [])
    flags += [f.replace('\\"', '"') for f in pybind() if f.startswith("-D")]  # (quoted there for a shell)
    print(torch.__version__)
    print(" ".join(flags))
    print("|".join(cpp_extension.include_paths()))
    print(cpp_extension.library_paths()[0])
    print(span() + (f" (torch {have[0]}.{have[1]} is newer than tested)" if have > NEWEST else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

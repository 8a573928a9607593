"""The native core (#59), built where a Rust toolchain is (setuptools-rust, as maturin would, from
``native/Cargo.toml``); ``optional``: without one, ``pip install .`` installs compactlab on its
Python engine and ``compactlab --version`` says so. Everything else is in pyproject.toml."""

import glob
import os

from setuptools import setup
from setuptools_rust import Binding, RustExtension

# a native module an earlier build left in build/ (setuptools copies build/lib into the wheel
# whole) is never shipped: a build without a Rust toolchain installed an old one, a build with one
# makes its own
for stale in glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "build", "lib*", "compactlab",
                                    "_native*")):
    os.remove(stale)

# built for the interpreter that installs it, not for the stable ABI (abi3): the limited API makes
# every reference count taken or let go, and every item of a tuple or a list read, a call into
# libpython, which the version's own API does in line (replay -p s08: 1,288 -> 1,249 M instructions,
# 3.4% less CPU). The module is built where it is installed, for that Python, so nothing is lost.
setup(rust_extensions=[RustExtension("compactlab._native", path="native/Cargo.toml", binding=Binding.PyO3,
                                     py_limited_api=False, optional=True, debug=False)])

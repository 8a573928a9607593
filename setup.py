"""The native core (#59), built where a Rust toolchain is (setuptools-rust, as maturin would, from
``native/Cargo.toml``); ``optional``: without one, ``pip install .`` installs compactlab on its
Python engine and ``compactlab --version`` says so. Everything else is in pyproject.toml."""

from setuptools import setup
from setuptools_rust import Binding, RustExtension

setup(rust_extensions=[RustExtension("compactlab._native", path="native/Cargo.toml", binding=Binding.PyO3,
                                     py_limited_api=True, optional=True, debug=False)])

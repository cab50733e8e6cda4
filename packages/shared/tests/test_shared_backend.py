import os

import pytest
import torch

from iclr25.shared import backend as backend_mod
from iclr25.shared import is_interpreting, resolve_backend, triton_available


class FakeCuda:
    """A stand-in for a CUDA tensor: resolve_backend only reads ``.device.type``."""

    class device:
        type = "cuda"


def test_auto_on_cpu_is_torch_even_when_interpreting():
    assert resolve_backend(torch.zeros(2), "auto") == "torch"
    assert resolve_backend(None) == "torch"
    assert resolve_backend("cpu") == "torch"


def test_torch_is_always_torch():
    assert resolve_backend(FakeCuda(), "torch") == "torch"


def test_auto_on_cuda_picks_triton_unless_disabled(monkeypatch):
    monkeypatch.setattr(backend_mod, "_triton_imports", lambda: True)
    monkeypatch.delenv("ICLR25_DISABLE_TRITON", raising=False)
    assert resolve_backend(FakeCuda(), "auto") == "triton"
    assert resolve_backend("cuda:0", "auto") == "triton"
    monkeypatch.setenv("ICLR25_DISABLE_TRITON", "1")
    assert resolve_backend(FakeCuda(), "auto") == "torch"
    assert triton_available() is False


def test_auto_on_cuda_without_triton_is_torch(monkeypatch):
    monkeypatch.setattr(backend_mod, "_triton_imports", lambda: False)
    assert resolve_backend(FakeCuda(), "auto") == "torch"
    with pytest.raises(RuntimeError, match="not importable"):
        resolve_backend(FakeCuda(), "triton")


def test_explicit_triton_on_cpu_needs_interpreter(monkeypatch):
    monkeypatch.setattr(backend_mod, "_triton_imports", lambda: True)
    monkeypatch.delenv("ICLR25_DISABLE_TRITON", raising=False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert is_interpreting()
    assert resolve_backend(torch.zeros(1), "triton") == "triton"
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert not is_interpreting()
    with pytest.raises(RuntimeError, match="interpreter"):
        resolve_backend(torch.zeros(1), "triton")


@pytest.mark.parametrize("bad", ["cuda", "Triton", "", None, 3])
def test_unknown_backend_is_a_clear_value_error(bad):
    with pytest.raises(ValueError, match="unknown backend"):
        resolve_backend(torch.zeros(1), bad)


def test_plugin_switched_interpreter_on_before_kernel_import():
    # The plugin runs at pytest start-up, before this module (and any kernel module) was imported.
    if not torch.cuda.is_available():
        assert os.environ.get("TRITON_INTERPRET") == "1"

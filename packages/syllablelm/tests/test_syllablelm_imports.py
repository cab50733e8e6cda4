"""The package, every module in it, its kernels, its gpu/triton tests and its benchmarks import without
espeakng-loader (the GPU image lacks it; it is only needed to synthesise speech) or the other modules that image
lacks.

The modules are re-imported in this process with those names blocked (torch and transformers stay loaded, so this is
fast), then the original modules are put back.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from pathlib import Path

import pytest

import iclr25

HERE = Path(__file__).resolve().parent
BLOCKED = frozenset({"espeakng_loader", "xgboost", "cvxpy", "highspy", "constriction", "trl"})
PKG = "iclr25.syllablelm"


class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked (not on the GPU image)")
        return None


def _ours(name: str) -> bool:
    return name == PKG or name.startswith(PKG + ".") or name.split(".")[0] in BLOCKED


def _import_blocked(files: list[Path], walk: bool = True) -> list[str]:
    """Import every package module (``walk``) and exec ``files`` with BLOCKED unimportable; restore afterwards."""
    saved = {k: v for k, v in sys.modules.items() if _ours(k)}
    saved_attr = getattr(iclr25, "syllablelm", None)
    for k in saved:
        del sys.modules[k]
    blocker = _Block()
    sys.meta_path.insert(0, blocker)
    try:
        mods = []
        if walk:
            root = Path(importlib.import_module(PKG).__file__).parent
            for p in sorted(root.rglob("*.py")):  # files, not pkgutil: data/ is a namespace subpackage
                parts = p.relative_to(root).with_suffix("").parts
                if parts[-1] == "__main__":  # would run the CLI
                    continue
                mods.append(".".join((PKG, *parts[:-1], *(() if parts[-1] == "__init__" else parts[-1:]))))
            for m in mods:
                importlib.import_module(m)
        for i, path in enumerate(files):
            spec = importlib.util.spec_from_file_location(f"_syllablelm_probe_{i}", path)
            spec.loader.exec_module(importlib.util.module_from_spec(spec))
        return mods
    finally:
        sys.meta_path.remove(blocker)
        for k in [k for k in sys.modules if _ours(k)]:
            del sys.modules[k]
        sys.modules.update(saved)
        if saved_attr is not None:
            iclr25.syllablelm = saved_attr


def test_imports_without_espeakng_loader():
    files = [HERE / "test_syllablelm_gpu.py", HERE / "test_syllablelm_kernels.py"]
    files += sorted((HERE.parent / "benchmarks").glob("bench_*.py"))
    mods = _import_blocked(files)
    assert f"{PKG}.data.synth" in mods and f"{PKG}.data.espeak" in mods and f"{PKG}.kernels" in mods
    assert len(files) >= 4


def test_the_blocker_catches_an_eager_import(tmp_path):
    """The blocker is real: a file importing espeakng_loader at module level fails."""
    bad = tmp_path / "eager.py"
    bad.write_text("import espeakng_loader\n")
    with pytest.raises(ImportError, match="blocked"):
        _import_blocked([bad], walk=False)
    import iclr25.syllablelm.data.espeak as espeak  # the original modules are back in place

    assert espeak.__name__ == f"{PKG}.data.espeak"


def test_lm_interleaving_and_loaders_are_top_level():
    import iclr25.syllablelm as pkg
    from iclr25.syllablelm import interleaving, lm, lm_train, loaders
    from iclr25.syllablelm.data import loaders as data_loaders
    from iclr25.syllablelm.data import syllabify

    expected = {
        lm: ["SyllableLM", "SyllableLMConfig"],
        lm_train: ["LMTrainConfig", "train_lm", "load_lm_checkpoint", "pair_accuracy"],
        interleaving: ["interleave", "deinterleave", "InterleavedVocab", "greedy_short_units", "Vocoder"],
        loaders: ["load_fairseq_lm", "lm_state_to_fairseq", "load_official_units"],
        data_loaders: ["load_audio", "read_textgrid", "write_textgrid", "iter_librispeech"],
        syllabify: ["syllables_from_textgrid", "syllables_from_alignment", "syllabify"],
    }
    for mod, names in expected.items():
        for name in names:
            assert name in pkg.__all__, name
            assert getattr(pkg, name) is getattr(mod, name), name


def test_no_top_level_name_shadows_a_module():
    """``iclr25.syllablelm.<name>`` must stay the module when a module has that name (``interleave`` is a function;
    its module is ``interleaving``)."""
    import iclr25.syllablelm as pkg

    root = Path(pkg.__file__).parent
    modules = {p.stem for p in root.glob("*.py")} | {p.name for p in root.iterdir() if p.is_dir()}
    assert not sorted(modules & set(pkg.__all__))

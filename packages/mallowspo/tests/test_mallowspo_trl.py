"""TRL integration: MallowsDPOTrainer with scale 1 equals trl.DPOTrainer(loss_type=["sigmoid"]) on the same batch;
with the entropy estimator it equals this package's MallowsPOTrainer. Skipped only when TRL is absent."""

import copy
import os

import pytest
import torch

pytest.importorskip("trl")
datasets = pytest.importorskip("datasets")

from trl import DPOConfig, DPOTrainer  # noqa: E402

from iclr25.mallowspo import MallowsPOConfig, MallowsPOTrainer  # noqa: E402
from iclr25.mallowspo.integrations.trl import MallowsDPOConfig, MallowsDPOTrainer  # noqa: E402
from iclr25.mallowspo.models import byte_tokenizer, tiny_causal_lm  # noqa: E402

pytestmark = pytest.mark.integration
os.environ.setdefault("TQDM_DISABLE", "1")

ROWS = [
    {"prompt": "!abc:", "chosen": "aabbcc", "rejected": "dddd"},
    {"prompt": "?xy:", "chosen": "ab", "rejected": "hhhgg"},
    {"prompt": "!q:", "chosen": "abab", "rejected": "cc"},
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tok = byte_tokenizer()
    ds = datasets.Dataset.from_list(ROWS)
    model, ref = tiny_causal_lm(seed=1), tiny_causal_lm(seed=2)
    # make the reference non-uniform so the entropy scale is not ~0
    with torch.no_grad():
        ref.lm_head.weight.mul_(5.0)  # H̄ ≈ 0.4–0.7: not clamped by dispersion_eps
    out = str(tmp_path_factory.mktemp("trl"))
    kw = dict(
        output_dir=out,
        per_device_train_batch_size=3,
        report_to=[],
        beta=0.1,
        use_cpu=True,
        bf16=False,  # DPOConfig defaults to bf16 autocast; compare in fp32
        max_steps=1,
        dataloader_num_workers=0,
        logging_steps=1,
        save_strategy="no",
    )
    return tok, ds, model, ref, kw


def _trainer(cls, cfg, setup):
    tok, ds, model, ref, _ = setup
    return cls(
        model=copy.deepcopy(model), ref_model=copy.deepcopy(ref), args=cfg, train_dataset=ds, processing_class=tok
    )


def test_scale_one_equals_trl_sigmoid(setup):
    kw = setup[4]
    trl_t = _trainer(DPOTrainer, DPOConfig(loss_type=["sigmoid"], **kw), setup)
    ours = _trainer(MallowsDPOTrainer, MallowsDPOConfig(fixed_neg_log_dispersion=1.0, **kw), setup)
    batch = next(iter(trl_t.get_train_dataloader()))
    a = trl_t.compute_loss(trl_t.model, batch)
    b = ours.compute_loss(ours.model, batch)
    assert abs(a.item() - b.item()) < 1e-6
    a.backward()
    b.backward()
    ga = torch.cat([p.grad.flatten() for p in trl_t.model.parameters() if p.grad is not None])
    gb = torch.cat([p.grad.flatten() for p in ours.model.parameters() if p.grad is not None])
    assert torch.allclose(ga, gb, atol=1e-6)


def test_entropy_scale_matches_our_trainer(setup):
    tok, _, model, ref, kw = setup
    trl_t = _trainer(MallowsDPOTrainer, MallowsDPOConfig(**kw), setup)
    batch = next(iter(trl_t.get_train_dataloader()))
    a = trl_t.compute_loss(trl_t.model, batch)
    scale = trl_t._metrics["train"]["mallows/neg_log_dispersion"][-1]
    assert scale > 0.05
    cfg = MallowsPOConfig(loss_type="mallows_dpo", beta=0.1, reference_free=False, length_normalization=False)
    ours = MallowsPOTrainer(copy.deepcopy(model), copy.deepcopy(ref), cfg, pad_token_id=tok.pad_token_id)
    b, metrics = ours.compute_loss(batch)
    assert abs(a.item() - b.item()) < 5e-6  # fp32: TRL's fused LM head vs a plain forward
    assert metrics["neg_log_dispersion"] == pytest.approx(scale, abs=1e-6)


def test_train_runs_and_logs(setup):
    kw = dict(setup[4])
    t = _trainer(MallowsDPOTrainer, MallowsDPOConfig(mallows_loss_type="mallows_phi", **kw), setup)
    out = t.train()
    assert torch.isfinite(torch.tensor(out.training_loss))


def test_precomputed_reference_entropies_match_the_online_loss(setup):
    # precompute_ref_log_probs=True stores log-probs and entropies; the loss then equals the online one, without a
    # reference model at training time
    kw = dict(setup[4])
    online = _trainer(MallowsDPOTrainer, MallowsDPOConfig(**kw), setup)
    pre = _trainer(MallowsDPOTrainer, MallowsDPOConfig(precompute_ref_log_probs=True, **kw), setup)
    assert {"ref_chosen_entropy", "ref_rejected_entropy", "ref_chosen_logps"} <= set(pre.train_dataset.column_names)
    batch_pre = next(iter(pre.get_train_dataloader()))
    assert "ref_chosen_entropy" in batch_pre
    batch = {k: v for k, v in batch_pre.items() if not k.startswith("ref_")}
    a = online.compute_loss(online.model, batch)
    scale_online = online._metrics["train"]["mallows/neg_log_dispersion"][-1]
    pre.ref_model = None  # the precomputed path must not touch it
    b = pre.compute_loss(pre.model, batch_pre)
    assert abs(a.item() - b.item()) < 1e-6
    assert pre._metrics["train"]["mallows/neg_log_dispersion"][-1] == pytest.approx(scale_online, abs=1e-6)
    assert scale_online > 0.05


def test_vocab_from_logits_not_weight_shape(setup):
    # under ZeRO-3 a weight is a shard (shape [0]); the ln V normalisation must come from the logits
    kw = dict(setup[4])
    t = _trainer(MallowsDPOTrainer, MallowsDPOConfig(**kw), setup)
    batch = next(iter(t.get_train_dataloader()))
    a = t.compute_loss(t.model, batch).item()
    sharded = torch.nn.Linear(8, 1)
    sharded.weight = torch.nn.Parameter(torch.empty(0))
    t.ref_model.get_output_embeddings = lambda: sharded
    assert t.compute_loss(t.model, batch).item() == pytest.approx(a, abs=1e-7)


@pytest.mark.parametrize("loss_type", ["mallows_dpo", "mallows_phi"])
def test_training_from_the_reference_moves_the_policy(setup, loss_type):
    tok, ds, _, ref, kw = setup
    kw = dict(kw, learning_rate=1e-2, max_steps=2)
    policy = copy.deepcopy(ref)  # policy = reference: Δ = 0 at the first step
    before = [p.detach().clone() for p in policy.parameters()]
    t = MallowsDPOTrainer(
        model=policy,
        ref_model=copy.deepcopy(ref),
        args=MallowsDPOConfig(mallows_loss_type=loss_type, **kw),
        train_dataset=ds,
        processing_class=tok,
    )
    t.train()
    first = next(h for h in t.state.log_history if "grad_norm" in h)
    assert first["grad_norm"] > 1e-4
    moved = max((p.detach() - b).abs().max().item() for p, b in zip(t.model.parameters(), before))
    assert moved > 1e-4


@pytest.mark.parametrize(
    "field_value",
    [
        {"loss_type": ["sigmoid", "sft"]},
        {"loss_type": ["ipo"]},
        {"loss_weights": [1.0]},
        {"use_weighting": True},
        {"ld_alpha": 0.5},
        {"f_divergence_type": "js_divergence"},
        {"sync_ref_model": True},
        {"router_aux_loss_coef": 0.01},
        {"mallows_loss_type": "mallows_phi", "label_smoothing": 0.1},
        {"fixed_neg_log_dispersion": -1.0},
    ],
)
def test_unsupported_dpo_config_fields_are_refused(setup, field_value):
    kw = dict(setup[4])
    with pytest.raises(ValueError) as err:
        MallowsDPOConfig(**kw, **field_value)
    name = next(k for k in field_value if k != "mallows_loss_type")
    assert name in str(err.value)


def test_bad_mallows_loss_type_is_refused(setup):
    with pytest.raises(ValueError, match="mallows_loss_type"):
        MallowsDPOConfig(mallows_loss_type="kto", **setup[4])


def test_trl_version_gate(monkeypatch):
    # the suite runs on one end of the pinned range (the CI venv: 1.16; 1.15 checked by PYTHONPATH=<trl 1.15 dir>)
    import importlib
    import warnings

    import trl

    import iclr25.mallowspo.integrations.trl as mod

    assert mod.TESTED_TRL[0] <= mod._trl_version() <= mod.TESTED_TRL[1]
    monkeypatch.setattr(trl, "__version__", "1.14.2")
    with pytest.raises(ImportError, match=r"trl>=1.15,<1.17"):
        importlib.reload(mod)
    monkeypatch.setattr(trl, "__version__", "1.17.0.dev0")
    with pytest.warns(UserWarning, match="tested with trl 1.15 and 1.16"):
        importlib.reload(mod)
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.reload(mod)

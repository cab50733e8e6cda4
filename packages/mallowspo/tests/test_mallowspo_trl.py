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
        ref.lm_head.weight.mul_(30.0)
    out = str(tmp_path_factory.mktemp("trl"))
    kw = dict(
        output_dir=out,
        per_device_train_batch_size=3,
        report_to=[],
        beta=0.1,
        use_cpu=True,
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
    assert abs(a.item() - b.item()) < 1e-6
    assert metrics["neg_log_dispersion"] == pytest.approx(scale, abs=1e-6)


def test_train_runs_and_logs(setup):
    kw = dict(setup[4])
    t = _trainer(MallowsDPOTrainer, MallowsDPOConfig(mallows_loss_type="mallows_phi", **kw), setup)
    out = t.train()
    assert torch.isfinite(torch.tensor(out.training_loss))


def test_precompute_without_entropy_is_refused(setup):
    kw = dict(setup[4])
    with pytest.raises(ValueError, match="entropy"):
        _trainer(MallowsDPOTrainer, MallowsDPOConfig(precompute_ref_log_probs=True, **kw), setup)
    with pytest.raises(ValueError, match="mallows_loss_type"):
        MallowsDPOConfig(mallows_loss_type="kto", **kw)

"""Conversational (chat-template) preference rows: rendering, exact token ids, one BOS only, JSONL, and the same
loss as the equivalent plain-text row. The tokenizers are built offline in the test (no hub download)."""

import json
import math

import pytest
import torch

from iclr25.mallowspo import MallowsPOConfig, MallowsPOTrainer
from iclr25.mallowspo.data import (
    apply_chat_template_row,
    collate_preference,
    load_preference_jsonl,
    save_preference_jsonl,
    tokenize_preference,
)
from iclr25.mallowspo.models import _byte_of, tiny_causal_lm

# roles in angle brackets as plain bytes; every turn closed by EOS; BOS emitted by the template
TEMPLATE_WITH_BOS = (
    "{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{{ eos_token }}{% endfor %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
TEMPLATE_NO_BOS = TEMPLATE_WITH_BOS.replace("{{ bos_token }}", "")

CHAT_ROW = {
    "prompt": [{"role": "user", "content": "hi"}],
    "chosen": [{"role": "assistant", "content": "ok"}],
    "rejected": [{"role": "assistant", "content": "no"}],
}
# the same pair as plain text, rendered by hand from TEMPLATE_WITH_BOS
TEXT_ROW = {"prompt": "<bos><user>hi<eos><assistant>", "chosen": "ok<eos>", "rejected": "no<eos>"}

# hand-checked ids: bytes are their own ids, <pad>=256, <bos>=257, <eos>=258
USER = [60, 117, 115, 101, 114, 62]  # "<user>"
ASSISTANT = [60, 97, 115, 115, 105, 115, 116, 97, 110, 116, 62]  # "<assistant>"
PROMPT_BODY = USER + [104, 105] + [258] + ASSISTANT  # "<user>hi<eos><assistant>"
CHOSEN_IDS = [111, 107, 258]  # "ok<eos>" (the template's EOS, no second one appended)
REJECTED_IDS = [110, 111, 258]  # "no<eos>"


def _tokenizer(template, adds_bos):
    """A byte-level PreTrainedTokenizerFast built from a tokenizers object; optionally its post-processor adds BOS."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet(), key=_byte_of)
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    vocab.update({"<pad>": 256, "<bos>": 257, "<eos>": 258})
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tk.decoder = decoders.ByteLevel()
    tk.add_special_tokens(["<pad>", "<bos>", "<eos>"])
    if adds_bos:
        tk.post_processor = processors.TemplateProcessing(
            single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", 257)]
        )
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>")
    tok.chat_template = template
    return tok


def test_render_matches_hand_rendering():
    tok = _tokenizer(TEMPLATE_WITH_BOS, adds_bos=False)
    assert apply_chat_template_row({**CHAT_ROW, "id": 7}, tok) == {**TEXT_ROW, "id": 7}
    assert apply_chat_template_row(TEXT_ROW, tok) is TEXT_ROW  # standard rows pass through


@pytest.mark.parametrize("template", ["with_bos", "no_bos"])
@pytest.mark.parametrize("adds_bos", [False, True])
def test_exact_ids_and_a_single_bos(template, adds_bos):
    tok = _tokenizer(TEMPLATE_WITH_BOS if template == "with_bos" else TEMPLATE_NO_BOS, adds_bos)
    assert (tok("a")["input_ids"][0] == 257) == adds_bos  # the tokenizer really adds BOS (or not)
    (ex,) = tokenize_preference([CHAT_ROW], tok)
    # BOS iff the template or the tokenizer emits one, and never twice
    expect_bos = [257] if (template == "with_bos" or adds_bos) else []
    assert ex["prompt_ids"] == expect_bos + PROMPT_BODY
    assert ex["chosen_ids"] == CHOSEN_IDS and ex["rejected_ids"] == REJECTED_IDS
    full = ex["prompt_ids"] + ex["chosen_ids"]
    assert full.count(257) == len(expect_bos) <= 1
    assert full.count(258) == 2  # the user turn's and the assistant turn's EOS, none appended on top


def test_bos_forced_on_off_and_collapsed():
    tok = _tokenizer(TEMPLATE_WITH_BOS, adds_bos=True)
    # forcing BOS off never removes the template's own BOS; forcing it on never doubles it
    for add_bos in (False, True):
        (ex,) = tokenize_preference([CHAT_ROW], tok, add_bos=add_bos)
        assert ex["prompt_ids"] == [257] + PROMPT_BODY
    # BOS text in the prompt on top of a BOS-emitting template: collapsed to one
    doubled = {**TEXT_ROW, "prompt": "<bos>" + TEXT_ROW["prompt"]}
    (ex,) = tokenize_preference([doubled], tok)
    assert ex["prompt_ids"] == [257] + PROMPT_BODY
    plain = _tokenizer(TEMPLATE_NO_BOS, adds_bos=False)
    (ex,) = tokenize_preference([CHAT_ROW], plain, add_bos=True)
    assert ex["prompt_ids"] == [257] + PROMPT_BODY
    # prompt truncation keeps the leading BOS and the end of the prompt
    (ex,) = tokenize_preference([CHAT_ROW], tok, max_prompt_length=4)
    assert ex["prompt_ids"] == [257] + ASSISTANT[-3:]


def test_implicit_prompt_equals_explicit():
    tok = _tokenizer(TEMPLATE_WITH_BOS, adds_bos=True)
    implicit = {
        "chosen": CHAT_ROW["prompt"] + CHAT_ROW["chosen"],
        "rejected": CHAT_ROW["prompt"] + CHAT_ROW["rejected"],
    }
    assert tokenize_preference([implicit], tok) == tokenize_preference([CHAT_ROW], tok)


def test_conversational_row_and_text_row_give_the_same_loss():
    tok = _tokenizer(TEMPLATE_WITH_BOS, adds_bos=True)
    chat = tokenize_preference([CHAT_ROW, {**CHAT_ROW, "chosen": [{"role": "assistant", "content": "sure!"}]}], tok)
    text = tokenize_preference([TEXT_ROW, {**TEXT_ROW, "chosen": "sure!<eos>"}], tok)
    assert chat == text
    cfg = MallowsPOConfig(beta=0.5, reference_free=False, length_normalization=False, loss_type="mallows_dpo")
    trainer = MallowsPOTrainer(tiny_causal_lm(seed=1), tiny_causal_lm(seed=2), cfg, pad_token_id=256)
    lc, _ = trainer.compute_loss(collate_preference(chat, 256))
    lt, _ = trainer.compute_loss(collate_preference(text, 256))
    assert torch.isfinite(lc) and lc.item() == lt.item()


def test_conversational_jsonl_roundtrip_and_errors(tmp_path):
    path = tmp_path / "chat.jsonl"
    implicit = {
        "chosen": CHAT_ROW["prompt"] + CHAT_ROW["chosen"],
        "rejected": CHAT_ROW["prompt"] + CHAT_ROW["rejected"],
    }
    assert save_preference_jsonl(path, [CHAT_ROW, implicit]) == 2
    assert load_preference_jsonl(path) == [CHAT_ROW, implicit]
    bad = tmp_path / "bad.jsonl"
    cases = [
        ({**CHAT_ROW, "prompt": "hi"}, "'prompt' is a string but chosen/rejected are conversations"),
        ({**CHAT_ROW, "chosen": [{"role": "assistant"}]}, "needs string 'role' and 'content'"),
        ({**CHAT_ROW, "rejected": []}, "non-empty list"),
        ({"chosen": CHAT_ROW["chosen"], "rejected": CHAT_ROW["rejected"]}, "share no first message"),
        ({"prompt": "a", "chosen": "b", "rejected": 3}, "must be strings"),
    ]
    for row, msg in cases:
        bad.write_text(json.dumps(CHAT_ROW) + "\n" + json.dumps(row) + "\n")
        with pytest.raises(ValueError, match="bad.jsonl:2: .*" + msg.replace("(", r"\(")):
            load_preference_jsonl(bad)
    no_template = _tokenizer(None, adds_bos=False)
    with pytest.raises(ValueError, match="chat_template"):
        tokenize_preference([CHAT_ROW], no_template)


def test_trainer_rejects_untokenised_rows():
    trainer = MallowsPOTrainer(tiny_causal_lm(seed=1), tiny_causal_lm(seed=2), MallowsPOConfig())
    with pytest.raises(ValueError, match="tokenize_preference"):
        trainer.train([CHAT_ROW])


@pytest.mark.integration
def test_cli_trains_on_conversational_jsonl(tmp_path, capsys):
    from transformers import AutoTokenizer

    from iclr25.mallowspo.cli import main

    tok = _tokenizer(TEMPLATE_WITH_BOS, adds_bos=True)
    tiny_causal_lm(arch="llama", n_layer=1, d_model=32, n_head=2).save_pretrained(tmp_path / "model")
    tok.save_pretrained(tmp_path / "model")
    loaded = AutoTokenizer.from_pretrained(tmp_path / "model")
    (ex,) = tokenize_preference([CHAT_ROW], loaded)  # the template and the BOS behaviour survive the round trip
    assert ex["prompt_ids"] == [257] + PROMPT_BODY and ex["chosen_ids"] == CHOSEN_IDS
    rows = [
        {**CHAT_ROW, "chosen": [{"role": "assistant", "content": c}], "rejected": [{"role": "assistant", "content": r}]}
        for c, r in [("ok", "no"), ("yes", "nah"), ("sure", "x"), ("fine", "bad")]
    ]
    save_preference_jsonl(tmp_path / "chat.jsonl", rows)
    cfg = {
        "data": str(tmp_path / "chat.jsonl"),
        "model": str(tmp_path / "model"),
        "output_dir": str(tmp_path / "run"),
        "mallowspo": {"beta": 0.5, "per_device_batch_size": 2, "gradient_accumulation_steps": 1, "learning_rate": 1e-3},
    }
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    assert main(["train", "--config", str(tmp_path / "cfg.json")]) == 0
    hist = json.loads((tmp_path / "run" / "history.json").read_text())
    assert len(hist) == 2 and all(math.isfinite(h["loss"]) for h in hist)

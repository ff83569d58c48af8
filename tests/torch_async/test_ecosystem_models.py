"""Models as the ecosystem builds them: transformers language models from a config (tied input
and output embeddings, AdamW, ``get_scheduler``, gradient clipping), timm models from code.

Each is optional: it skips, saying why, where the package is not installed (``pip install -e
.[dev]`` brings transformers; timm needs torchvision, whose PyPI wheel is a CUDA build).  Built
inside the block, or outside and passed through ``make_async``; the optimizer made before the
first step as trainers make it.  Losses, parameters and the ties themselves are compared.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from d2l_async.torch_async import AsyncTensor, asynchronous, make_async

from .helpers import slow


def _transformers():
    return pytest.importorskip("transformers", reason="transformers is not installed (pip install -e .[dev])")


def _lm(kind: str):
    tf = _transformers()
    torch.manual_seed(0)
    if kind == "gpt2":
        cfg = tf.GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=2, n_head=2)
        return tf.GPT2LMHeadModel(cfg), (lambda m: m.lm_head.weight is m.transformer.wte.weight)
    if kind == "bert":
        cfg = tf.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=32, max_position_embeddings=16)
        return tf.BertForMaskedLM(cfg), (lambda m: m.cls.predictions.decoder.weight is
                                         m.bert.embeddings.word_embeddings.weight)
    cfg = tf.T5Config(vocab_size=50, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_heads=2,
                      tie_word_embeddings=True, decoder_start_token_id=0, pad_token_id=0)
    return tf.T5ForConditionalGeneration(cfg), (lambda m: m.shared.weight is m.encoder.embed_tokens.weight
                                                is m.lm_head.weight)


def _batch(kind: str) -> dict:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 50, (2, 8), generator=g)
    if kind == "t5":
        return {"input_ids": ids, "labels": torch.randint(0, 50, (2, 6), generator=g)}
    return {"input_ids": ids, "labels": ids.clone()}


def _train(model, kind: str, tied, steps: int = 3) -> tuple:
    tf = _transformers()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    sched = tf.get_scheduler("linear", opt, num_warmup_steps=1, num_training_steps=steps)
    batch = _batch(kind)
    model.train()
    torch.manual_seed(2)  # dropout
    losses = []
    for _ in range(steps):
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        losses.append(loss.detach())
    return ([float(v) for v in losses], [n for n, _ in model.named_parameters()],
            [p.detach().numpy().tobytes() for p in model.parameters()], len(opt.state), tied(model))


def _case(kind: str, build: str, workers: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, tied = _lm(kind)
        expected = _train(model, kind, tied)
        model, tied = _lm(kind) if build == "make_async" else (None, tied)
        with asynchronous(workers=workers) as rt:
            if build == "inside":
                model, tied = _lm(kind)
            else:
                make_async(model)
            got = _train(model, kind, tied)
            kinds = {type(p) for p in model.parameters()}
    assert expected[4] and got[4], "the tie is gone"
    assert got[1] == expected[1] and got[3] == expected[3], "named_parameters or optimizer state differ"
    assert got[0] == expected[0], f"losses {got[0]} vs eager {expected[0]}"
    assert got[2] == expected[2], "parameters differ"
    assert kinds == {AsyncTensor} and rt.statistics().failed == 0


@pytest.mark.parametrize("kind,build,workers", [("gpt2", "make_async", 1), ("bert", "inside", 2),
                                                ("t5", "make_async", 2)])
def test_transformers_language_models_with_tied_embeddings_train_as_eager(kind, build, workers):
    _case(kind, build, workers)


@slow
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("build", ["inside", "make_async"])
@pytest.mark.parametrize("kind", ["gpt2", "bert", "t5"])
def test_transformers_language_models_full_matrix(kind, build, workers):
    _case(kind, build, workers)


def test_gpt2_generates_as_eager():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, _ = _lm("gpt2")
        model.eval()
        ids = _batch("gpt2")["input_ids"][:1, :4]
        expected = model.generate(ids, max_new_tokens=5, do_sample=False, pad_token_id=0).tolist()
        with asynchronous():
            got = make_async(model).generate(ids, max_new_tokens=5, do_sample=False, pad_token_id=0).tolist()
    assert got == expected


def test_timm_models_train_as_eager():
    timm = pytest.importorskip("timm", reason="timm is not installed (it needs torchvision, whose PyPI wheel is a "
                                              "CUDA build: not in the dev extra)")
    for name in ("resnet10t", "convnext_atto"):
        def run(wrap):
            torch.manual_seed(0)
            model = wrap(timm.create_model(name, pretrained=False, num_classes=4))
            opt = timm.optim.create_optimizer_v2(model, opt="lamb", lr=1e-3)
            X = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
            y = torch.tensor([0, 3])
            losses = []
            for _ in range(2):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(X), y)
                loss.backward()
                opt.step()
                losses.append(float(loss))
            return losses
        expected = run(lambda m: m)
        with asynchronous():
            got = run(make_async)
        assert got == expected, name

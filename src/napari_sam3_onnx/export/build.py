"""Build Meta's SAM 3 image model with its tracker from ``sam3.model_builder`` (PyPI 0.1.4).

Two ways:

* from a checkpoint (``sam3.pt``, full size): ``sam3.model_builder.build_sam3_image_model`` with
  ``enable_inst_interactivity=True``, which also loads the ``tracker.*`` weights into the SAM head,
  memory encoder and memory attention the bundle exports;
* with seeded random weights at **reduced depth** for structural tests: the same builder with a few
  constructors given fewer layers (2 ViT blocks - one windowed, one global -, 1 text-encoder
  layer, 1 fusion-encoder, 1 detector-decoder and 1 geometry-encoder layer, 1 fuser block in the
  memory encoder, 2 memory-attention layers). Every tensor interface (channel counts, grids,
  queries, token lengths) is unchanged, so the exported graphs have the real signatures.

Random weights make every output trivially empty (no detection passes 0.5, every tracked object
is "absent"). :func:`adjust_for_parity` shifts three biases, documented there, so the outputs a
parity check compares are not empty.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import torch

from .torch_env import cpu_host

#: Constructor arguments forced at reduced depth (constructor name in ``sam3.model_builder``).
REDUCED = {
    "ViT": {"depth": 2, "global_att_blocks": (1,)},
    "VETextEncoder": {"layers": 1},
    "TransformerEncoderFusion": {"num_layers": 1},
    "TransformerDecoder": {"num_layers": 1},
    "SequenceGeometryEncoder": {"num_layers": 1},
    "TransformerEncoderCrossAttention": {"num_layers": 2},
    "SimpleFuser": {"num_layers": 1},
}


@contextlib.contextmanager
def _reduced_constructors() -> Iterator[None]:
    import sam3.model_builder as mb

    saved = {name: getattr(mb, name) for name in REDUCED}

    def forced(cls, overrides):
        def make(*args, **kwargs):
            return cls(*args, **{**kwargs, **overrides})

        return make

    for name, overrides in REDUCED.items():
        setattr(mb, name, forced(saved[name], overrides))
    try:
        yield
    finally:
        for name, cls in saved.items():
            setattr(mb, name, cls)


def build_model(
    bpe_path: Path | str,
    checkpoint: Path | str | None = None,
    *,
    seed: int = 0,
    reduced: bool | None = None,
) -> torch.nn.Module:
    """Meta's ``Sam3Image`` with its tracker (``model.inst_interactive_predictor.model``).

    Parameters
    ----------
    bpe_path : Path or str
        CLIP's ``bpe_simple_vocab_16e6.txt.gz`` (the ``sam3`` wheel does not ship it).
    checkpoint : Path or str, optional
        A SAM 3 checkpoint (``sam3.pt``): full depth, its weights. None: reduced depth with
        random weights seeded by ``seed``.
    reduced : bool, optional
        Without a checkpoint: False builds the **full-depth** architecture with random weights
        (real sizes and cost, for speed/memory measurements and the precision gate); default
        True. Ignored with a checkpoint.
    """
    import sam3.model_builder as mb

    torch.manual_seed(seed)
    reduced = checkpoint is None and (reduced is None or reduced)
    with cpu_host(), (_reduced_constructors() if reduced else contextlib.nullcontext()):
        model = mb.build_sam3_image_model(
            bpe_path=str(bpe_path), device="cpu", eval_mode=True,
            checkpoint_path=None if checkpoint is None else str(checkpoint),
            load_from_HF=False, enable_segmentation=True, enable_inst_interactivity=True,
        )
    if checkpoint is None:
        _init_empty_parameters(model)
    model.eval()
    model.reduced_depth = reduced  # type: ignore[attr-defined]
    return model


@torch.no_grad()
def _init_empty_parameters(model: torch.nn.Module) -> None:
    """Seed the text encoder's two ``torch.empty`` parameters (upstream relies on a checkpoint).

    ``positional_embedding`` and ``text_projection`` are created uninitialised; left so, they hold
    whatever memory held (NaN or huge values that make every text feature NaN).
    """
    enc = model.backbone.language_backbone.encoder
    torch.nn.init.normal_(enc.positional_embedding, std=0.01)
    if getattr(enc, "text_projection", None) is not None and isinstance(
            enc.text_projection, torch.nn.Parameter):
        torch.nn.init.normal_(enc.text_projection, std=enc.width ** -0.5)


@torch.no_grad()
def adjust_for_parity(model: torch.nn.Module) -> None:
    """Make a random-weight model's outputs non-trivial (documented, deterministic).

    * tracker object-score head, last bias += 6: the object is called present on every slice
      (random weights call it absent, so every mask would be -1024 and every memory "no object");
    * detector presence head, last bias += 6: sigmoid(presence) ~ 1 instead of ~0.5 (else no
      score can pass 0.5);
    * detector dot-product scoring: ``hs_proj`` scaled x8, so query logits spread over roughly
      +-10 and some queries pass 0.5 while others do not.

    Only biases / one scale change: the graphs' structure and every other weight stay as built.
    """
    tracker = model.inst_interactive_predictor.model
    tracker.sam_mask_decoder.pred_obj_score_head.layers[-1].bias += 6.0
    model.transformer.decoder.presence_token_head.layers[-1].bias += 6.0
    model.dot_prod_scoring.hs_proj.weight *= 8.0
    model.dot_prod_scoring.hs_proj.bias *= 8.0
